# The whole training step of the CPU backend against the independent PyTorch reference
# (tools/torch_ref); of the CUDA backend on a GPU and on the host emulation. Skips (77) where
# PyTorch is absent (.ci/run installs it) or, for the GPU tests, where there is no GPU.
if(TARGET sg_graph)
  add_executable(test_torch_parity ${CMAKE_SOURCE_DIR}/tests/test_torch_parity.c)
  target_link_libraries(test_torch_parity PRIVATE sg_graph)
  add_test(NAME torch_parity_tiny COMMAND test_torch_parity unet_tiny 2 ${CMAKE_SOURCE_DIR})
  add_test(NAME torch_parity_cifar COMMAND test_torch_parity unet_cifar 2 ${CMAKE_SOURCE_DIR})
  # the cosine noise schedule (T 4000): the oracle's own betas, x_t and the whole step; v
  # prediction (the loss's target), alone and with cosine; min-SNR loss weighting (the oracle's
  # weights written as diffusers' training scripts compute them), for eps and for v
  add_test(NAME torch_parity_tiny_cosine
           COMMAND test_torch_parity unet_tiny 2 ${CMAKE_SOURCE_DIR} cpu fp32 cosine)
  add_test(NAME torch_parity_tiny_v COMMAND test_torch_parity unet_tiny 2 ${CMAKE_SOURCE_DIR} cpu fp32 v)
  add_test(NAME torch_parity_tiny_cosine_v
           COMMAND test_torch_parity unet_tiny 2 ${CMAKE_SOURCE_DIR} cpu fp32 cosine,v)
  add_test(NAME torch_parity_tiny_snr
           COMMAND test_torch_parity unet_tiny 2 ${CMAKE_SOURCE_DIR} cpu fp32 snr)
  add_test(NAME torch_parity_tiny_cosine_v_snr
           COMMAND test_torch_parity unet_tiny 2 ${CMAKE_SOURCE_DIR} cpu fp32 cosine,v,snr)
  # a class-conditional model: the class embedding's forward and its table's gradient
  add_test(NAME torch_parity_tiny_classes
           COMMAND test_torch_parity unet_tiny 4 ${CMAKE_SOURCE_DIR} cpu fp32 classes)
  # zero terminal SNR (v, min-SNR weights): the oracle's rescaled betas, a sample at abar = 0
  add_test(NAME torch_parity_tiny_v_snr_zsnr
           COMMAND test_torch_parity unet_tiny 4 ${CMAKE_SOURCE_DIR} cpu fp32 v,snr,zsnr)
  # P2 loss weighting (eps and v): the oracle's weights from Choi et al.'s formula
  add_test(NAME torch_parity_tiny_p2
           COMMAND test_torch_parity unet_tiny 4 ${CMAKE_SOURCE_DIR} cpu fp32 p2)
  add_test(NAME torch_parity_tiny_v_p2
           COMMAND test_torch_parity unet_tiny 4 ${CMAKE_SOURCE_DIR} cpu fp32 v,p2)
  # input perturbation (v): x_t from the perturbed noise (dumped), the target v from eps
  add_test(NAME torch_parity_tiny_v_perturb
           COMMAND test_torch_parity unet_tiny 4 ${CMAKE_SOURCE_DIR} cpu fp32 v,perturb)
  set_tests_properties(torch_parity_tiny torch_parity_cifar torch_parity_tiny_cosine
                       torch_parity_tiny_v torch_parity_tiny_cosine_v torch_parity_tiny_snr
                       torch_parity_tiny_cosine_v_snr torch_parity_tiny_classes
                       torch_parity_tiny_v_snr_zsnr torch_parity_tiny_v_perturb
                       torch_parity_tiny_p2 torch_parity_tiny_v_p2
                       PROPERTIES SKIP_RETURN_CODE 77)
  set_tests_properties(torch_parity_cifar PROPERTIES TIMEOUT 900)
  # on a GPU (label gpu): the CUDA backend's step against the same float64 oracle, fp32 and
  # bf16, with PyTorch's own step on the GPU printed beside it (issue 11: GPU parity)
  if(SG_HAVE_CUDA)
    add_test(NAME torch_parity_gpu COMMAND test_torch_parity unet_cifar 2 ${CMAKE_SOURCE_DIR} cuda)
    add_test(NAME torch_parity_gpu_bf16
             COMMAND test_torch_parity unet_cifar 2 ${CMAKE_SOURCE_DIR} cuda bf16)
    set_tests_properties(torch_parity_gpu torch_parity_gpu_bf16
                         PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 600)
  endif()
  # the same CUDA path on the host emulation (tests/cuda_host), unet_tiny: CI proves it
  if(TARGET sg_graph_cuda_host)
    add_executable(test_torch_parity_host ${CMAKE_SOURCE_DIR}/tests/test_torch_parity.c)
    target_link_libraries(test_torch_parity_host PRIVATE sg_graph_cuda_host)
    add_test(NAME torch_parity_cuda_host
             COMMAND test_torch_parity_host unet_tiny 2 ${CMAKE_SOURCE_DIR} cuda)
    add_test(NAME torch_parity_cuda_host_bf16
             COMMAND test_torch_parity_host unet_tiny 2 ${CMAKE_SOURCE_DIR} cuda bf16)
    # the v target and the cosine table on the CUDA noising kernel, the min-SNR weights on the
    # CUDA loss kernels
    add_test(NAME torch_parity_cuda_host_cosine_v_snr
             COMMAND test_torch_parity_host unet_tiny 2 ${CMAKE_SOURCE_DIR} cuda fp32 cosine,v,snr)
    set_tests_properties(torch_parity_cuda_host torch_parity_cuda_host_bf16
                         torch_parity_cuda_host_cosine_v_snr
                         PROPERTIES LABELS cuda_host SKIP_RETURN_CODE 77 TIMEOUT 600
                                    ENVIRONMENT SG_SIM_ORDER=forward)
  endif()
endif()
add_test(NAME torch_ref_selftest COMMAND /usr/bin/python3 ${CMAKE_SOURCE_DIR}/tests/torch_ref_selftest.py --skip-bench)
set_tests_properties(torch_ref_selftest PROPERTIES TIMEOUT 600)
