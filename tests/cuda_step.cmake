# The whole step on the GPU: graph replay vs eager, repeatability, CPU vs GPU. Label gpu; it
# exits 77 (skip) where no GPU exists.
if(TARGET sg_graph AND SG_HAVE_CUDA)
  add_executable(test_cuda_step ${CMAKE_SOURCE_DIR}/tests/test_cuda_step.c)
  target_link_libraries(test_cuda_step PRIVATE sg_graph)
  add_test(NAME cuda_step COMMAND test_cuda_step)
  set_tests_properties(cuda_step PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 600)
endif()
