add_executable(test_planner ${CMAKE_SOURCE_DIR}/tests/test_planner.c)
target_link_libraries(test_planner PRIVATE sg_planner)
add_test(NAME planner COMMAND test_planner)
add_test(NAME plan_cli COMMAND bash ${CMAKE_SOURCE_DIR}/tests/test_plan_cli.sh $<TARGET_FILE:plan>)
