# gpu_check.cmake — tools/gpu_check.sh's logic without a GPU (fake nvidia-smi, cmake, ctest,
# compute-sanitizer): failures, deadline, a killed run, SKIPs and the all-green path.
add_test(NAME gpu_check_logic COMMAND bash ${CMAKE_SOURCE_DIR}/tests/test_gpu_check.sh)
set_tests_properties(gpu_check_logic PROPERTIES TIMEOUT 300)
# tools/gpu_profile.sh's logic (fake ncu and bench): its commands, summaries, SKIP and failures
add_test(NAME gpu_profile_logic COMMAND bash ${CMAKE_SOURCE_DIR}/tests/test_gpu_profile.sh)
set_tests_properties(gpu_profile_logic PROPERTIES TIMEOUT 120)
