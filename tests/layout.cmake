# The folder dependency rules of docs/architecture.md, checked on the sources' includes.
add_test(NAME layout COMMAND bash ${CMAKE_SOURCE_DIR}/tests/test_layout.sh ${CMAKE_SOURCE_DIR})
