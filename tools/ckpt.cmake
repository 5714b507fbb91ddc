# ckpt.cmake — build/ckpt, the checkpoint inspection CLI (tools/ckpt.c over checkpoints/).
add_executable(ckpt ${CMAKE_SOURCE_DIR}/tools/ckpt.c)
target_link_libraries(ckpt PRIVATE sg_cli sg_ckpt)
set_target_properties(ckpt PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
