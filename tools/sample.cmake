# sample.cmake — build/sample: DDPM / DDIM sampling from a checkpoint to a PNG grid
# (tools/sample.c over graph/, checkpoints/ and data/).
if(TARGET sg_graph AND TARGET sg_data)
  add_executable(sample ${CMAKE_SOURCE_DIR}/tools/sample.c)
  target_link_libraries(sample PRIVATE sg_cli sg_graph sg_data)
  set_target_properties(sample PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
endif()
