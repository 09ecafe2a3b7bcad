# CTest library_version_test (cmake -P): the build-time library version (library_version.cmake)
#  1. changes when any hashed source changes, and does not rewrite its output when none did;
#  2. is up to date in this build: the generated file equals a fresh run over today's sources,
#     i.e. the build regenerated it after the last edit (plain `cmake --build`, no re-configure).
#   -DSCRIPT=<library_version.cmake> -DROOT -DLIST -DIN -DBUILT=<the build's generated file>
#   -DPROJECT_VERSION -DWORK=<scratch dir>
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}/src")
file(WRITE "${WORK}/src/a.cu" "__global__ void k() {}\n")
file(WRITE "${WORK}/src/b.cc" "int search() { return 1; }\n")
file(WRITE "${WORK}/list.txt" "${WORK}/src/a.cu\n${WORK}/src/b.cc\n")

function(run out)
  execute_process(COMMAND "${CMAKE_COMMAND}" -DROOT=${WORK}/src -DLIST=${WORK}/list.txt -DIN=${IN}
                          -DOUT=${out} -DPROJECT_VERSION=${PROJECT_VERSION} -P "${SCRIPT}"
                  RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "library_version.cmake failed: ${err}")
  endif()
endfunction()

run("${WORK}/v1.cc")
file(READ "${WORK}/v1.cc" v1)
if(NOT v1 MATCHES "${PROJECT_VERSION}\\+k[0-9a-f]+")
  message(FATAL_ERROR "no version in the generated file:\n${v1}")
endif()
# Unchanged sources: same content, and the file is not rewritten (nothing recompiles).
file(TIMESTAMP "${WORK}/v1.cc" t1 "%s")
execute_process(COMMAND "${CMAKE_COMMAND}" -E sleep 1.1)
run("${WORK}/v1.cc")
file(TIMESTAMP "${WORK}/v1.cc" t2 "%s")
if(NOT t1 STREQUAL t2)
  message(FATAL_ERROR "an unchanged hash rewrote the generated file")
endif()
# One byte more in one source: a new version.
file(APPEND "${WORK}/src/b.cc" " ")
run("${WORK}/v2.cc")
file(READ "${WORK}/v2.cc" v2)
if(v1 STREQUAL v2)
  message(FATAL_ERROR "editing a hashed source did not change the library version")
endif()

# The build's own file is current.
execute_process(COMMAND "${CMAKE_COMMAND}" -DROOT=${ROOT} -DLIST=${LIST} -DIN=${IN}
                        -DOUT=${WORK}/now.cc -DPROJECT_VERSION=${PROJECT_VERSION} -P "${SCRIPT}"
                RESULT_VARIABLE rc)
file(READ "${WORK}/now.cc" now)
file(READ "${BUILT}" built)
if(NOT rc EQUAL 0 OR NOT now STREQUAL built)
  message(FATAL_ERROR "the build's library version is stale:\n${built}\nsources now give:\n${now}")
endif()
message(STATUS "library_version_test: ok")
