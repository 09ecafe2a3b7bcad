# Installing transposed: the daemon, the CLI and the worker; the libraries a batch job links
# (core, proto, client, kernels) with self-contained headers under include/transposed/; the CMake
# package (find_package(transposed CONFIG): targets transposed::client, transposed::kernels,
# transposed::core, transposed::proto, transposed::transpose); a pkg-config file (transposed.pc);
# and a Debian package of all of it (`cpack -G DEB` in the build directory).
#
# Header layout, the same in the build tree and the install prefix: a consumer includes
# <transposed/client/client.h>, <transposed/kernels/config.h>, <transposed/kernels/launch.h>,
# <transposed/core/problem.h>; the headers themselves include "core/...", "proto/..." and
# "transposed/v1/...", which resolve through the second include directory (include/transposed).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(TRANSPOSED_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/transposed)
set(_inc ${CMAKE_INSTALL_INCLUDEDIR})

# Build tree: <build>/include/transposed/{core,proto,client} point at the sources, so
# <transposed/client/client.h> works for add_subdirectory/FetchContent consumers too.
set(_build_inc ${PROJECT_BINARY_DIR}/include)
file(MAKE_DIRECTORY ${_build_inc}/transposed)
foreach(d core proto client)
  if(NOT EXISTS ${_build_inc}/transposed/${d})
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${d} ${_build_inc}/transposed/${d} SYMBOLIC)
  endif()
endforeach()
target_include_directories(transposed_core PUBLIC $<BUILD_INTERFACE:${_build_inc}>
                                                  $<INSTALL_INTERFACE:${_inc}>
                                                  $<INSTALL_INTERFACE:${_inc}/transposed>)

# Exported names (transposed::<name>) and the same names as aliases inside a consumer's build.
set(_transposed_exported core proto_messages proto proto_util client kernels)
foreach(n ${_transposed_exported})
  set_target_properties(transposed_${n} PROPERTIES EXPORT_NAME ${n})
  add_library(transposed::${n} ALIAS transposed_${n})
endforeach()
set_target_properties(transpose PROPERTIES EXPORT_NAME transpose)

install(TARGETS transposed_core transposed_proto_messages transposed_proto transposed_proto_util
                transposed_client transposed_kernels transpose
        EXPORT transposedTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
# The C ABI for other languages (kernels/include/transposed/kernels/c_api.h; the Python package
# loads it with ctypes from the library path).
install(TARGETS transposed_launch LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
foreach(t transposed transposectl transposed-worker)
  if(TARGET ${t})
    install(TARGETS ${t} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  endif()
endforeach()

install(DIRECTORY ${PROJECT_SOURCE_DIR}/core/ DESTINATION ${_inc}/transposed/core
        FILES_MATCHING PATTERN "*.h")
install(FILES ${PROJECT_BINARY_DIR}/generated/core/version.h DESTINATION ${_inc}/transposed/core)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/proto/ DESTINATION ${_inc}/transposed/proto
        FILES_MATCHING PATTERN "*.h" PATTERN "transposed" EXCLUDE)
install(FILES ${PROJECT_BINARY_DIR}/generated/transposed/v1/transposed.pb.h
              ${PROJECT_BINARY_DIR}/generated/transposed/v1/transposed.grpc.pb.h
        DESTINATION ${_inc}/transposed/v1)
install(FILES ${PROJECT_SOURCE_DIR}/client/client.h ${PROJECT_SOURCE_DIR}/client/format.h
        DESTINATION ${_inc}/transposed/client)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/kernels/include/transposed/kernels
        DESTINATION ${_inc}/transposed FILES_MATCHING PATTERN "*.h")
install(FILES ${PROJECT_SOURCE_DIR}/proto/transposed/v1/transposed.proto
        DESTINATION ${CMAKE_INSTALL_DATADIR}/transposed/proto)

install(EXPORT transposedTargets NAMESPACE transposed:: DESTINATION ${TRANSPOSED_INSTALL_CMAKEDIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/transposedConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/transposedConfig.cmake
                              INSTALL_DESTINATION ${TRANSPOSED_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/transposedConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/transposedConfig.cmake
              ${PROJECT_BINARY_DIR}/transposedConfigVersion.cmake
        DESTINATION ${TRANSPOSED_INSTALL_CMAKEDIR})

# pkg-config: the static libraries in link order, gRPC/protobuf through their own .pc files.
set(TRANSPOSED_PC_CUDA_LIBS "")
if(TRANSPOSED_HAVE_CUDA)
  set(TRANSPOSED_PC_CUDA_LIBS "-L${CUDAToolkit_LIBRARY_DIR} -lcudart_static -ldl -lrt -lpthread")
  set(TRANSPOSED_PC_CUDA_CFLAGS "-I${CUDAToolkit_INCLUDE_DIRS} -DTRANSPOSED_HAVE_CUDA=1")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/transposed.pc.in ${PROJECT_BINARY_DIR}/transposed.pc
               @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/transposed.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# Debian package: `cpack -G DEB` in the build directory (daemon, CLI, worker, libraries, headers,
# CMake and pkg-config files, the systemd unit and example configuration).
install(FILES ${PROJECT_SOURCE_DIR}/deploy/transposed.service
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/systemd/system)
install(FILES ${PROJECT_SOURCE_DIR}/deploy/transposed.toml
        DESTINATION ${CMAKE_INSTALL_DATADIR}/transposed/examples)
if(PROJECT_IS_TOP_LEVEL)
  set(CPACK_PACKAGE_NAME transposed)
  set(CPACK_PACKAGE_VENDOR "transposed")
  set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "auto-tuning gRPC daemon for GPU matrix transposition")
  set(CPACK_GENERATOR DEB)
  set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
  set(CPACK_DEBIAN_PACKAGE_MAINTAINER "transposed maintainers")
  set(CPACK_DEBIAN_PACKAGE_SECTION devel)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
  set(CPACK_DEBIAN_PACKAGE_DEPENDS "libgrpc++-dev, libprotobuf-dev, nlohmann-json3-dev")
  include(CPack)
endif()
