# engine_table.cmake — the per-layer conv engine table (tests/test_engine_table.c): on the CPU
# backend, and on the host emulation of the CUDA backend (the real backend_cuda*.c, own only).
if(TARGET sg_graph)
  add_executable(test_engine_table ${CMAKE_SOURCE_DIR}/tests/test_engine_table.c)
  target_link_libraries(test_engine_table PRIVATE sg_graph)
  add_test(NAME engine_table COMMAND test_engine_table)
  set_tests_properties(engine_table PROPERTIES LABELS "asan")
  # Replay of the engine table fuzz corpus (tests/fuzz/README.md): parse -> JSON round trip ->
  # the check against the named model's plan
  sg_corpus_test(test_engine_table_corpus engine_table_fuzz_one engine_table_fuzz_target.c
                 engine_table_corpus sg_graph)
endif()
if(TARGET sg_graph_cuda_host)
  add_executable(test_engine_table_cuda_host ${CMAKE_SOURCE_DIR}/tests/test_engine_table.c)
  target_compile_definitions(test_engine_table_cuda_host PRIVATE SG_TEST_CUDA_HOST=1)
  target_link_libraries(test_engine_table_cuda_host PRIVATE sg_graph_cuda_host)
  add_test(NAME engine_table_cuda_host COMMAND test_engine_table_cuda_host)
  set_tests_properties(engine_table_cuda_host PROPERTIES LABELS cuda_host TIMEOUT 900
                       ENVIRONMENT "SG_SIM_ORDER=forward" SKIP_RETURN_CODE 77)
endif()
if(TARGET bench AND TARGET plan AND TARGET train AND TARGET ckpt)
  add_test(NAME engine_table_cli COMMAND bash ${CMAKE_SOURCE_DIR}/tests/test_engine_table_cli.sh
                                         $<TARGET_FILE:bench> $<TARGET_FILE:plan>
                                         $<TARGET_FILE:train> $<TARGET_FILE:ckpt>)
  set_tests_properties(engine_table_cli PROPERTIES TIMEOUT 300)
endif()
