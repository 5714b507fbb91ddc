# sampler.cmake — tests of the DDPM / DDIM sampler (graph/sampler.c) and the `sample` CLI.
#   sampler           the math, the device step against the host reference, the device loop
#                     against the host loop, end to end (CPU backend)
#   sample_cli        the CLI (also under ASan: its files, folders and callbacks)
#   sampler_cuda_host the CUDA backend's sampling (graph replay, eager, CPU) executed on the
#                     host (tests/cuda_host's sg_graph_cuda_host; label cuda_host), every
#                     launch forward and then in reverse from the same memory (SG_SIM_BLOCK_CHECK)
#   sampler_gpu       the same on a GPU (label gpu; exit 77 where none exists)
if(TARGET sg_graph)
  add_executable(test_sampler ${CMAKE_SOURCE_DIR}/tests/test_sampler.c)
  target_link_libraries(test_sampler PRIVATE sg_graph sg_data)
  if(SG_NO_CUDA)
    # the sample CLI's check of the reason graph/backend_nocuda.c gives
    target_compile_definitions(test_sampler PRIVATE SG_NO_CUDA_BY_OPTION=1)
  endif()
  add_test(NAME sampler COMMAND test_sampler)
  set_tests_properties(sampler PROPERTIES LABELS "asan" TIMEOUT 60)
  if(TARGET sample)
    add_dependencies(test_sampler sample)
    add_test(NAME sample_cli COMMAND test_sampler --cli $<TARGET_FILE:sample>)
    set_tests_properties(sample_cli PROPERTIES TIMEOUT 60 LABELS asan)
  endif()
  if(TARGET sg_graph_cuda_host)
    add_executable(test_sampler_host ${CMAKE_SOURCE_DIR}/tests/test_sampler.c)
    target_link_libraries(test_sampler_host PRIVATE sg_graph_cuda_host sg_data)
    add_test(NAME sampler_cuda_host COMMAND test_sampler_host --cuda)
    set_tests_properties(sampler_cuda_host PROPERTIES ENVIRONMENT
                         "SG_SIM_ORDER=forward;SG_SIM_BLOCK_CHECK=1" LABELS cuda_host TIMEOUT 600)
  endif()
  if(SG_HAVE_CUDA)
    add_test(NAME sampler_gpu COMMAND test_sampler --cuda)
    set_tests_properties(sampler_gpu PROPERTIES LABELS gpu SKIP_RETURN_CODE 77)
  endif()
endif()
