# transposed_add_test(NAME name SOURCES a.cc ... LIBS lib ... LABELS unit|integration|gpu)
# Builds a GoogleTest binary into bin/ and registers it with CTest under the given labels.
#
# With TRANSPOSED_BUILD_TESTING off (BUILD_TESTING=OFF, or transposed added to another project)
# the target is still declared, so the directories' target_* calls on it keep working, but it is
# excluded from `all`, links no GoogleTest and is not registered: nothing of it is built or run.
function(transposed_add_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  if(NOT TRANSPOSED_BUILD_TESTING)
    add_executable(${T_NAME} EXCLUDE_FROM_ALL ${T_SOURCES})
    return()
  endif()
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main Threads::Threads)
  add_test(NAME ${T_NAME} COMMAND ${T_NAME})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 600)
  endif()
  set_tests_properties(${T_NAME} PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT})
endfunction()
