# ckpt_bench.cmake — build/ckpt_bench: checkpoint save/load throughput and compressed size
# against plain zstd, on a real training state (tools/ckpt_bench.c).
if(TARGET sg_graph AND TARGET sg_data)
  add_executable(ckpt_bench ${CMAKE_SOURCE_DIR}/tools/ckpt_bench.c)
  target_link_libraries(ckpt_bench PRIVATE sg_cli sg_graph sg_data sg_ckpt)
  set_target_properties(ckpt_bench PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
endif()
