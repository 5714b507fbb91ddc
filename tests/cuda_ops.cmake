# cuda_ops.cmake — the CUDA op tests (tests/test_cuda_ops.c): every launcher declared in
# kernels/cuda/cuda_kernels.h against the CPU reference. Label `gpu`; exits 77 (SKIP) where
# there is no GPU.

# The coverage list: every `int cuda_<name>(` declaration of the header, regenerated whenever
# the header changes, so a new launcher without a test fails the test (test_cuda_ops.c adds
# the pointwise launchers, which the header generates from common/sg_pointwise.h). Made in every build:
# the host execution (tests/cuda_host.cmake) runs the same test without nvcc.
set(_sg_cuda_hdr ${CMAKE_SOURCE_DIR}/kernels/cuda/cuda_kernels.h)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_sg_cuda_hdr})
file(STRINGS ${_sg_cuda_hdr} _sg_cuda_decls REGEX "^int cuda_[a-z0-9_]+\\(")
set(_sg_cuda_list "")
foreach(_decl IN LISTS _sg_cuda_decls)
  string(REGEX MATCH "^int (cuda_[a-z0-9_]+)\\(" _m "${_decl}")
  if(_m)
    string(APPEND _sg_cuda_list "    \"${CMAKE_MATCH_1}\",\n")
  endif()
endforeach()
file(CONFIGURE OUTPUT ${CMAKE_BINARY_DIR}/generated/cuda_launchers.inc
     CONTENT "${_sg_cuda_list}" @ONLY)

# Every kernel of kernels/cuda begins with SG_PDL_ENTER() (programmatic dependent launch:
# cuda_kernels.h), read from the sources, so it runs in every build.
add_test(NAME kernel_entry COMMAND python3 ${CMAKE_SOURCE_DIR}/tests/test_kernel_entry.py
                                   ${CMAKE_SOURCE_DIR})

if(SG_HAVE_CUDA AND TARGET sg_kernels_cuda)
  add_executable(test_cuda_ops ${CMAKE_SOURCE_DIR}/tests/test_cuda_ops.c)
  target_include_directories(test_cuda_ops PRIVATE ${CMAKE_BINARY_DIR}/generated)
  target_link_libraries(test_cuda_ops PRIVATE sg_kernels_cuda sg_kernels_cpu CUDA::cudart
                                              CUDA::cublas m)
  add_test(NAME cuda_ops COMMAND test_cuda_ops)
  set_tests_properties(cuda_ops PROPERTIES LABELS gpu SKIP_RETURN_CODE 77)
endif()

# The cuDNN engine's operation graphs, built on the host (no GPU): every descriptor up to the
# graph's handle must finalize (tests/test_cudnn_graphs.c). Only with cuDNN in the build.
if(SG_HAVE_CUDNN AND TARGET sg_kernels_cuda)
  add_executable(test_cudnn_graphs ${CMAKE_SOURCE_DIR}/tests/test_cudnn_graphs.c)
  target_include_directories(test_cudnn_graphs SYSTEM PRIVATE ${SG_CUDNN_INCLUDE})
  target_link_libraries(test_cudnn_graphs PRIVATE sg_common ${SG_CUDNN_LIB} CUDA::cudart m)
  add_test(NAME cudnn_graphs COMMAND test_cudnn_graphs)
  set_tests_properties(cudnn_graphs PROPERTIES SKIP_RETURN_CODE 77)
endif()
