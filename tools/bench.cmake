# bench.cmake — build/bench: the replayed step's time, MFU, host time and per-op breakdown.
if(TARGET sg_graph AND TARGET sg_data)
  add_executable(bench ${CMAKE_SOURCE_DIR}/tools/bench.c)
  target_link_libraries(bench PRIVATE sg_cli sg_graph sg_data)
  target_compile_definitions(bench PRIVATE SG_BUILD_ID="${SG_BUILD_ID}")
  set_target_properties(bench PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
endif()
