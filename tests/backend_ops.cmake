# backend_ops.cmake — every op through two backends (tests/test_backend_ops.c):
#   backend_ops_selftest  the CPU backend against itself: the harness alone, on any machine
#   backend_ops           CPU vs the real CUDA backend and kernels executed on the host
#                         (tests/cuda_host's sg_graph_cuda_host): registered whenever that
#                         target exists (always in CI) and never skipped; backend_ops_reverse
#                         the same with the threads of a block run in the reverse order
#   backend_ops_gpu       CPU vs the CUDA backend on a real GPU, with the large cases: label
#                         gpu, exit 77 (ctest SKIP) where no GPU exists
# sg_graph_cuda_host may be defined by a tests/*.cmake included after this one, so the targets
# are made at the end of the directory (cmake_language DEFER), when every target is known.
function(sg_backend_ops_tests)
  if(NOT TARGET sg_graph)
    return()
  endif()
  add_executable(test_backend_ops ${CMAKE_SOURCE_DIR}/tests/test_backend_ops.c)
  target_link_libraries(test_backend_ops PRIVATE sg_graph m)
  add_test(NAME backend_ops_selftest COMMAND test_backend_ops --second cpu)
  set_tests_properties(backend_ops_selftest PROPERTIES LABELS asan)
  if(TARGET sg_graph_cuda_host)
    add_executable(test_backend_ops_host ${CMAKE_SOURCE_DIR}/tests/test_backend_ops.c)
    target_link_libraries(test_backend_ops_host PRIVATE sg_graph_cuda_host m)
    # the threads of a block in both scheduling orders of the emulation (SG_SIM_ORDER); the
    # forward one under the block check (every launch forward, then its blocks and threads in
    # reverse from the same memory, a difference refused: tests/cuda_host/sim_exec.cpp)
    add_test(NAME backend_ops COMMAND test_backend_ops_host --second cuda)
    add_test(NAME backend_ops_reverse COMMAND test_backend_ops_host --second cuda)
    set_tests_properties(backend_ops PROPERTIES ENVIRONMENT
                         "SG_SIM_ORDER=forward;SG_SIM_BLOCK_CHECK=1")
    set_tests_properties(backend_ops_reverse PROPERTIES ENVIRONMENT SG_SIM_ORDER=reverse)
    set_tests_properties(backend_ops backend_ops_reverse PROPERTIES LABELS cuda_host TIMEOUT 900)
    # attention on the fused kernels (SG_ATTN=fused; the bf16 cases with heads of 16k channels)
    add_test(NAME backend_ops_attn_fused COMMAND test_backend_ops_host --second cuda)
    set_tests_properties(backend_ops_attn_fused PROPERTIES ENVIRONMENT SG_ATTN=fused LABELS
                         cuda_host TIMEOUT 900)
    # the same with SG_CONV_TC=wgmma: the bf16 convs on the Hopper wgmma kernels (conv_wgmma.cu)
    # through the real backend; the fp32 convs refused with the reason
    add_test(NAME backend_ops_wgmma COMMAND test_backend_ops_host --second cuda)
    set_tests_properties(backend_ops_wgmma PROPERTIES ENVIRONMENT
                         "SG_SIM_ORDER=forward;SG_CONV_TC=wgmma" LABELS cuda_host TIMEOUT 900)
  endif()
  if(SG_HAVE_CUDA)
    add_test(NAME backend_ops_gpu COMMAND test_backend_ops --second cuda --skip-without-gpu --big)
    set_tests_properties(backend_ops_gpu PROPERTIES LABELS gpu SKIP_RETURN_CODE 77)
  endif()
endfunction()
cmake_language(DEFER CALL sg_backend_ops_tests)
