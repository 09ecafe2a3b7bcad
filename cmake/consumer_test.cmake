# Builds cmake/consumer (a project outside the tree) against transposed and runs it against the
# daemon at $ENV{TRANSPOSED_SERVER} (the test runs under testing/with_daemon).
#   cmake -DMODE=package|fetch -DBUILD_DIR=<transposed build> -DSOURCE_DIR=<transposed source>
#         -DWORK=<scratch dir> -P consumer_test.cmake
# package: `cmake --install` into WORK/prefix (not the configured prefix), find_package(transposed)
#          from there, the same program built a second time with only
#          `pkg-config --cflags --libs transposed` (no --define-prefix), and the systemd unit's
#          ExecStart and --config checked against that prefix.
# fetch:   FetchContent (add_subdirectory) of the source tree, without CUDA to keep it quick.
cmake_minimum_required(VERSION 3.25)
foreach(v MODE BUILD_DIR SOURCE_DIR WORK)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "consumer_test: -D${v}=... is required")
  endif()
endforeach()
if("$ENV{TRANSPOSED_SERVER}" STREQUAL "")
  message(FATAL_ERROR "consumer_test: TRANSPOSED_SERVER is not set (run under with_daemon)")
endif()

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " cmd "${ARGN}")
    message(FATAL_ERROR "consumer_test: `${cmd}` failed (${rc}):\n${out}")
  endif()
  message(STATUS "${out}")
endfunction()

file(REMOVE_RECURSE ${WORK})
set(consumer_src ${SOURCE_DIR}/cmake/consumer)
if(MODE STREQUAL "package")
  set(prefix ${WORK}/prefix)
  run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
  foreach(f include/transposed/client/client.h include/transposed/kernels/config.h
            include/transposed/core/problem.h include/transposed/v1/transposed.pb.h
            lib/cmake/transposed/transposedConfig.cmake lib/pkgconfig/transposed.pc)
    if(NOT EXISTS ${prefix}/${f})
      message(FATAL_ERROR "consumer_test: ${f} was not installed")
    endif()
  endforeach()
  run(${CMAKE_COMMAND} -S ${consumer_src} -B ${WORK}/build -G Ninja
      -DTRANSPOSED_FROM=package -DCMAKE_PREFIX_PATH=${prefix})
  run(${CMAKE_COMMAND} --build ${WORK}/build)
  run(${WORK}/build/consumer $ENV{TRANSPOSED_SERVER})

  # The systemd unit names this prefix's daemon and configuration.
  file(STRINGS ${prefix}/lib/systemd/system/transposed.service exec REGEX "^ExecStart=")
  set(want "ExecStart=${prefix}/bin/transposed --config ${prefix}/etc/transposed/transposed.toml")
  if(NOT exec STREQUAL want)
    message(FATAL_ERROR "consumer_test: the installed unit says\n  ${exec}\nwant\n  ${want}")
  endif()
  if(NOT EXISTS ${prefix}/etc/transposed/transposed.toml)
    message(FATAL_ERROR "consumer_test: the unit's --config file was not installed")
  endif()

  # pkg-config: the .pc file finds its prefix from where it lies (${pcfiledir}), so no
  # --define-prefix is needed: the paths must name this prefix, not the configured one.
  set(ENV{PKG_CONFIG_PATH} ${prefix}/lib/pkgconfig)
  execute_process(COMMAND pkg-config --variable=prefix transposed OUTPUT_VARIABLE pc_prefix
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  get_filename_component(pc_prefix "${pc_prefix}" REALPATH)
  get_filename_component(real_prefix "${prefix}" REALPATH)
  if(NOT pc_prefix STREQUAL real_prefix)
    message(FATAL_ERROR "consumer_test: transposed.pc's prefix is ${pc_prefix}, not ${real_prefix}")
  endif()
  execute_process(COMMAND pkg-config --cflags --libs transposed
                  RESULT_VARIABLE rc OUTPUT_VARIABLE flags ERROR_VARIABLE err
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "consumer_test: pkg-config transposed failed: ${err}")
  endif()
  separate_arguments(flags UNIX_COMMAND "${flags}")
  run(c++ -std=c++17 ${consumer_src}/main.cc -o ${WORK}/consumer_pc ${flags} -pthread)
  run(${WORK}/consumer_pc $ENV{TRANSPOSED_SERVER})
elseif(MODE STREQUAL "fetch")
  run(${CMAKE_COMMAND} -S ${consumer_src} -B ${WORK}/build -G Ninja -DTRANSPOSED_FROM=fetch
      -DTRANSPOSED_SOURCE_DIR=${SOURCE_DIR} -DTRANSPOSED_CUDA=OFF)
  run(${CMAKE_COMMAND} --build ${WORK}/build --target consumer)
  run(${WORK}/build/consumer $ENV{TRANSPOSED_SERVER})
else()
  message(FATAL_ERROR "consumer_test: MODE must be package or fetch, got '${MODE}'")
endif()
