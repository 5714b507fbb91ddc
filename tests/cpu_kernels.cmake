# CPU reference kernels: forward vs naive formulas, every backward vs finite differences,
# optimizer math, determinism (tests/test_cpu_kernels.c).
add_executable(test_cpu_kernels ${CMAKE_SOURCE_DIR}/tests/test_cpu_kernels.c)
target_link_libraries(test_cpu_kernels PRIVATE sg_kernels_cpu m)
add_test(NAME cpu_kernels COMMAND test_cpu_kernels)
