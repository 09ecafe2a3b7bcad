# `pip install ./python` into WORK/site (no build isolation, no network), then the installed
# package, from a directory outside the tree, asks the daemon at $ENV{TRANSPOSED_SERVER}.
file(REMOVE_RECURSE ${WORK})
execute_process(COMMAND ${PYTHON} -m pip install --no-build-isolation --no-deps --no-index
                        --target ${WORK}/site ${SOURCE_DIR}/python
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "pip install ./python failed (${rc}):\n${out}")
endif()
set(ENV{PYTHONPATH} ${WORK}/site)
execute_process(COMMAND ${PYTHON} -c
  "import transposed, sys; a = transposed.Client().get_config(64, 48, 'f32'); print(transposed.__file__, a.variant.name, a.source); sys.exit(0 if a.variant.name and transposed.__file__.startswith(sys.argv[1]) else 1)"
  ${WORK}/site
  WORKING_DIRECTORY ${WORK} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
message(STATUS "${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the pip-installed package did not answer (${rc}):\n${out}")
endif()
