# gpu_build_deps.cmake — the GPU machine's build from the carried .deps alone, in a clean tree
# (tests/test_gpu_build_deps.sh). It builds the project once more (-j2, Release): label `slow`.
# Skips (77) where .deps/ was not fetched, except under CI, where .ci/run fetches it first.
add_test(NAME gpu_build_deps COMMAND bash ${CMAKE_SOURCE_DIR}/tests/test_gpu_build_deps.sh)
set_tests_properties(gpu_build_deps PROPERTIES LABELS slow SKIP_RETURN_CODE 77 TIMEOUT 1500
                                               RUN_SERIAL ON)
