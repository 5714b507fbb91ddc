# hopper_build.cmake — kernels/cuda/hopper.cuh's inline PTX (mbarrier, cp.async.bulk.tensor,
# wgmma, setmaxnreg, elect.sync, stmatrix) assembled by nvcc and ptxas for sm_90a in every build
# that has nvcc, so a PTX typo fails CI without a GPU. tests/hopper_nvcc_check.cu uses every
# function of the header; it is compiled, never linked or run. (sm_90a through -gencode: the
# `-arch=sm_90a` shorthand also runs a plain sm_90 pass, which rejects wgmma and setmaxnreg.)
if(SG_HAVE_CUDA)
  add_library(sg_hopper_nvcc_check OBJECT ${CMAKE_SOURCE_DIR}/tests/hopper_nvcc_check.cu)
  set_target_properties(sg_hopper_nvcc_check PROPERTIES CUDA_ARCHITECTURES OFF)
  target_compile_options(sg_hopper_nvcc_check PRIVATE -gencode=arch=compute_90a,code=sm_90a)
  target_include_directories(sg_hopper_nvcc_check PRIVATE ${CMAKE_SOURCE_DIR})
endif()

# The Hopper probes (tests/hopper_probes.cuh) on a GPU: the same kernels and expectations that
# cuda_sim_selftest runs on the host emulation. Label gpu; exits 77 (SKIP) without a Hopper GPU.
if(SG_HAVE_CUDA)
  add_executable(test_hopper_gpu ${CMAKE_SOURCE_DIR}/tests/test_hopper_gpu.cu)
  set_target_properties(test_hopper_gpu PROPERTIES CUDA_ARCHITECTURES OFF)
  target_compile_options(test_hopper_gpu PRIVATE -gencode=arch=compute_90a,code=sm_90a)
  target_include_directories(test_hopper_gpu PRIVATE ${CMAKE_SOURCE_DIR})
  target_link_libraries(test_hopper_gpu PRIVATE CUDA::cudart)
  add_test(NAME hopper_gpu COMMAND test_hopper_gpu)
  set_tests_properties(hopper_gpu PROPERTIES LABELS gpu SKIP_RETURN_CODE 77)
endif()
