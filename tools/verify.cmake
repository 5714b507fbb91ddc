# verify.cmake — build/verify: replays training and checks it is bit-reproducible
# (tools/verify.c over graph/, data/ and checkpoints/).
if(TARGET sg_graph AND TARGET sg_data)
  add_executable(verify ${CMAKE_SOURCE_DIR}/tools/verify.c)
  target_link_libraries(verify PRIVATE sg_cli sg_graph sg_data m)
  set_target_properties(verify PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
endif()
