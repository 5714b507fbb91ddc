add_executable(plan ${CMAKE_SOURCE_DIR}/tools/plan.c)
target_link_libraries(plan PRIVATE sg_cli sg_planner)
set_target_properties(plan PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
