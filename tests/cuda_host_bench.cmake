# cuda_host_bench.cmake — build/bench itself on the host emulation of the CUDA backend
# (tests/cuda_host: the real backend_cuda*.c, its per-layer timing hooks time_node_engine and
# time_gemm, over the stand-in runtime and cuBLASLt), and the per-layer table's checks in
# tests/test_bench.sh --cuda-host. After cuda_host.cmake (file order): it needs
# sg_graph_cuda_host. The emulation's event times are not GPU times: the test checks the
# table's shape and consistency, never a speed. With cuDNN's headers, also bench and verify
# built over the emulated cuDNN (sg_graph_cuda_host_cudnn); the table is checked on that bench
# too.
if(TARGET sg_graph_cuda_host AND TARGET sg_data)
  add_executable(bench_cuda_host ${CMAKE_SOURCE_DIR}/tools/bench.c ${CMAKE_SOURCE_DIR}/tools/cli.c)
  target_include_directories(bench_cuda_host BEFORE PRIVATE ${SG_SIM_DIR}/include)
  target_compile_definitions(bench_cuda_host PRIVATE SG_BUILD_ID="${SG_BUILD_ID}")
  target_link_libraries(bench_cuda_host PRIVATE sg_graph_cuda_host sg_data PkgConfig::JANSSON m)
  # the GPU's build has cuDNN: the GPU call's rehearsal and launch audit run a bench built with
  # the emulated one (tests/cuda_host/sim_cudnn.cpp) where cuDNN's headers are, so `auto` and
  # the engine tuning reach cuDNN's plans as on the GPU
  set(_sg_gpu_call_bench bench_cuda_host)
  set(_sg_bench_dnn "")
  if(TARGET sg_graph_cuda_host_cudnn)
    add_executable(bench_cuda_host_cudnn ${CMAKE_SOURCE_DIR}/tools/bench.c
                                         ${CMAKE_SOURCE_DIR}/tools/cli.c)
    target_include_directories(bench_cuda_host_cudnn BEFORE PRIVATE ${SG_SIM_DIR}/include)
    target_compile_definitions(bench_cuda_host_cudnn PRIVATE SG_BUILD_ID="${SG_BUILD_ID}")
    target_link_libraries(bench_cuda_host_cudnn PRIVATE sg_graph_cuda_host_cudnn sg_data
                                                        PkgConfig::JANSSON m)
    set(_sg_gpu_call_bench bench_cuda_host_cudnn)
    # the per-layer table's checks run on it too (test_bench.sh's second argument)
    set(_sg_bench_dnn $<TARGET_FILE:bench_cuda_host_cudnn>)
    # verify on the emulated cuDNN: its stop/resume asks for the checkpoint's recorded cuDNN
    # engines by index and knobs (sg_cudnn_prefer), the path a GPU's resume takes
    add_executable(verify_cuda_host_cudnn ${CMAKE_SOURCE_DIR}/tools/verify.c
                                          ${CMAKE_SOURCE_DIR}/tools/cli.c)
    target_include_directories(verify_cuda_host_cudnn BEFORE PRIVATE ${SG_SIM_DIR}/include)
    target_link_libraries(verify_cuda_host_cudnn PRIVATE sg_graph_cuda_host_cudnn sg_data
                                                         PkgConfig::JANSSON m)
    add_test(NAME verify_cuda_host_cudnn
             COMMAND bash ${CMAKE_SOURCE_DIR}/tests/test_verify.sh --cuda-host
                     $<TARGET_FILE:verify_cuda_host_cudnn>)
    set_tests_properties(verify_cuda_host_cudnn PROPERTIES LABELS cuda_host TIMEOUT 900
                         ENVIRONMENT "SG_SIM_ORDER=forward")
  endif()
  add_test(NAME bench_cuda_host COMMAND bash ${CMAKE_SOURCE_DIR}/tests/test_bench.sh --cuda-host
                                        $<TARGET_FILE:bench_cuda_host> ${_sg_bench_dnn})
  set_tests_properties(bench_cuda_host PROPERTIES LABELS cuda_host TIMEOUT 900
                       ENVIRONMENT "SG_SIM_ORDER=forward")
  # every tools/gpu_call.sh variant rehearsed with its environment and flags on the emulation
  # (unet_tiny, one replay; the engine-table ones with a table tuned first): about 3 minutes
  add_test(NAME gpu_call_rehearsal COMMAND bash ${CMAKE_SOURCE_DIR}/tests/test_gpu_scripts.sh
                                           --rehearse $<TARGET_FILE:${_sg_gpu_call_bench}>)
  set_tests_properties(gpu_call_rehearsal PROPERTIES LABELS cuda_host TIMEOUT 900)
  # the same calls at the GPU's own shapes (unet_cifar batch 128, unet_adm64 batch 32 fp32, the
  # engine tuning) with every launch and GEMM checked and none executed (SG_SIM_LAUNCH_ONLY=1):
  # about 5 minutes, most of it filling the arenas
  add_test(NAME gpu_call_launch_audit
           COMMAND bash ${CMAKE_SOURCE_DIR}/tests/test_gpu_scripts.sh --launch-audit
                   $<TARGET_FILE:${_sg_gpu_call_bench}>)
  set_tests_properties(gpu_call_launch_audit PROPERTIES LABELS cuda_host TIMEOUT 1200)
endif()
