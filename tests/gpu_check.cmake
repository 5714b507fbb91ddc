# gpu_check.cmake — tools/gpu_check.sh's logic without a GPU (fake nvidia-smi, cmake, ctest,
# compute-sanitizer): failures, deadline, a killed run, SKIPs and the all-green path.
add_test(NAME gpu_check_logic COMMAND bash ${CMAKE_SOURCE_DIR}/tests/test_gpu_check.sh)
set_tests_properties(gpu_check_logic PROPERTIES TIMEOUT 300)
# tools/gpu_profile.sh's logic (fake ncu and bench): its commands, summaries, SKIP and failures
add_test(NAME gpu_profile_logic COMMAND bash ${CMAKE_SOURCE_DIR}/tests/test_gpu_profile.sh)
set_tests_properties(gpu_profile_logic PROPERTIES TIMEOUT 120)
# the device scripts against the tools they drive: every script parses, shellcheck finds no error
# in tools/*.sh, and every bench flag and SG_* knob gpu_call.sh passes is one bench and the code
# know (a renamed flag would waste a GPU call silently)
add_test(NAME gpu_scripts COMMAND bash ${CMAKE_SOURCE_DIR}/tests/test_gpu_scripts.sh
                                  $<TARGET_FILE:bench>)
set_tests_properties(gpu_scripts PROPERTIES TIMEOUT 120)
# .ci/failed_digest.sh (what CI prints last when a test failed) against a small ctest project
add_test(NAME ci_digest COMMAND bash ${CMAKE_SOURCE_DIR}/tests/test_ci_digest.sh)
set_tests_properties(ci_digest PROPERTIES TIMEOUT 60)
