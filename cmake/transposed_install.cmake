# Installing transposed: the daemon, the CLI and the worker; the libraries a batch job links
# (core, proto, client, kernels) with self-contained headers under include/transposed/; the CMake
# package (find_package(transposed CONFIG): targets transposed::client, transposed::kernels,
# transposed::core, transposed::proto, transposed::transpose); a pkg-config file (transposed.pc);
# the systemd unit, sysusers.d entry and example configuration; and two Debian packages
# (`cpack -G DEB` in the build directory): transposed (component runtime) and transposed-dev
# (component dev). Both the CMake package and the .pc file find the prefix from where they lie,
# so an install moved or made with `--prefix P` works as it is.
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
# Transposer (client/transposer.h: the daemon's answers and prepared launches; with CUDA).
if(TARGET transposed_transposer)
  set_target_properties(transposed_transposer PROPERTIES EXPORT_NAME transposer)
  add_library(transposed::transposer ALIAS transposed_transposer)
  install(TARGETS transposed_transposer EXPORT transposedTargets
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
  install(FILES ${PROJECT_SOURCE_DIR}/client/transposer.h DESTINATION ${_inc}/transposed/client)
endif()
# The C ABI for other languages (kernels/include/transposed/kernels/c_api.h; the Python package
# loads it with ctypes from the library path).
install(TARGETS transposed_launch LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime)
foreach(t transposed transposectl transposed-worker)
  if(TARGET ${t})
    install(TARGETS ${t} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
  endif()
endforeach()

install(DIRECTORY ${PROJECT_SOURCE_DIR}/core/ DESTINATION ${_inc}/transposed/core
        COMPONENT dev FILES_MATCHING PATTERN "*.h")
install(FILES ${PROJECT_BINARY_DIR}/generated/core/version.h DESTINATION ${_inc}/transposed/core
        COMPONENT dev)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/proto/ DESTINATION ${_inc}/transposed/proto
        COMPONENT dev FILES_MATCHING PATTERN "*.h" PATTERN "transposed" EXCLUDE)
install(FILES ${PROJECT_BINARY_DIR}/generated/transposed/v1/transposed.pb.h
              ${PROJECT_BINARY_DIR}/generated/transposed/v1/transposed.grpc.pb.h
        DESTINATION ${_inc}/transposed/v1 COMPONENT dev)
install(FILES ${PROJECT_SOURCE_DIR}/client/client.h ${PROJECT_SOURCE_DIR}/client/format.h
        DESTINATION ${_inc}/transposed/client COMPONENT dev)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/kernels/include/transposed/kernels
        DESTINATION ${_inc}/transposed COMPONENT dev FILES_MATCHING PATTERN "*.h")
install(FILES ${PROJECT_SOURCE_DIR}/proto/transposed/v1/transposed.proto
        DESTINATION ${CMAKE_INSTALL_DATADIR}/transposed/proto COMPONENT dev)

install(EXPORT transposedTargets NAMESPACE transposed:: DESTINATION ${TRANSPOSED_INSTALL_CMAKEDIR}
        COMPONENT dev)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/transposedConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/transposedConfig.cmake
                              INSTALL_DESTINATION ${TRANSPOSED_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/transposedConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/transposedConfig.cmake
              ${PROJECT_BINARY_DIR}/transposedConfigVersion.cmake
        DESTINATION ${TRANSPOSED_INSTALL_CMAKEDIR} COMPONENT dev)

# pkg-config: the static libraries in link order, gRPC/protobuf through their own .pc files. The
# prefix is relative to the .pc file's directory (${pcfiledir}), so pkg-config gives the right
# paths for any install prefix without --define-prefix.
# The CUDA toolkit's directories are variables of the .pc file (cuda_includedir, cuda_libdir:
# another toolkit with pkg-config --define-variable), not literal paths in the flags (lintian:
# pkg-config-bad-directive for /usr/local/cuda).
set(TRANSPOSED_PC_CUDA_LIBS "")
set(TRANSPOSED_PC_CUDA_VARS "")
if(TRANSPOSED_HAVE_CUDA)
  list(GET CUDAToolkit_INCLUDE_DIRS 0 _pc_cuda_inc)
  set(TRANSPOSED_PC_CUDA_VARS
      "cuda_includedir=${_pc_cuda_inc}\ncuda_libdir=${CUDAToolkit_LIBRARY_DIR}\n")
  set(TRANSPOSED_PC_CUDA_LIBS "-L\${cuda_libdir} -lcudart_static -ldl -lrt -lpthread")
  set(TRANSPOSED_PC_CUDA_CFLAGS "-I\${cuda_includedir} -DTRANSPOSED_HAVE_CUDA=1")
endif()
set(TRANSPOSED_PC_DIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}" OR IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  message(FATAL_ERROR "transposed: CMAKE_INSTALL_LIBDIR and CMAKE_INSTALL_INCLUDEDIR must be "
                      "relative to the prefix (the installed package is relocatable)")
endif()
file(RELATIVE_PATH TRANSPOSED_PC_UP /${TRANSPOSED_PC_DIR} /)
string(REGEX REPLACE "/$" "" TRANSPOSED_PC_UP "${TRANSPOSED_PC_UP}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/transposed.pc.in ${PROJECT_BINARY_DIR}/transposed.pc
               @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/transposed.pc DESTINATION ${TRANSPOSED_PC_DIR} COMPONENT dev)

# The systemd unit (ExecStart and --config with the install's paths), the sysusers.d entry and the
# example configuration: made when the install runs (cmake/install_service.cmake).
install(CODE "set(TRANSPOSED_SOURCE_DIR \"${PROJECT_SOURCE_DIR}\")
              set(TRANSPOSED_INSTALL_BINDIR \"${CMAKE_INSTALL_BINDIR}\")
              set(TRANSPOSED_STAGE_DIR \"${PROJECT_BINARY_DIR}/install-service\")
              include(\"${PROJECT_SOURCE_DIR}/cmake/install_service.cmake\")"
        COMPONENT runtime)

# Man pages (from --help), transposectl's completion scripts and the Debian changelog, made from
# the built programs at build time (deploy/debian/share.sh), and the copyright file: installed
# with the runtime package, the copyright and changelog with the dev package too (Debian policy:
# every package carries both).
set(_share ${PROJECT_BINARY_DIR}/generated/share)
set(_share_files ${_share}/man/transposed.1.gz ${_share}/man/transposectl.1.gz
                 ${_share}/completions/transposectl ${_share}/completions/_transposectl
                 ${_share}/completions/transposectl.fish ${_share}/doc/changelog.gz)
add_custom_command(
  OUTPUT ${_share_files}
  COMMAND bash ${PROJECT_SOURCE_DIR}/deploy/debian/share.sh $<TARGET_FILE:transposed>
          $<TARGET_FILE:transposectl> ${_share}
  DEPENDS transposed transposectl ${PROJECT_SOURCE_DIR}/deploy/debian/share.sh
          ${PROJECT_SOURCE_DIR}/deploy/debian/changelog
  COMMENT "man pages and completion scripts from the programs' --help")
add_custom_target(transposed_share ALL DEPENDS ${_share_files})
install(FILES ${_share}/man/transposed.1.gz ${_share}/man/transposectl.1.gz
        DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT runtime)
install(FILES ${_share}/completions/transposectl
        DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions COMPONENT runtime)
install(FILES ${_share}/completions/_transposectl
        DESTINATION ${CMAKE_INSTALL_DATADIR}/zsh/vendor-completions COMPONENT runtime)
install(FILES ${_share}/completions/transposectl.fish
        DESTINATION ${CMAKE_INSTALL_DATADIR}/fish/vendor_completions.d COMPONENT runtime)
foreach(_pkg_component runtime dev)
  set(_pkg_doc transposed)
  if(_pkg_component STREQUAL "dev")
    set(_pkg_doc transposed-dev)
  endif()
  install(FILES ${PROJECT_SOURCE_DIR}/deploy/debian/copyright ${_share}/doc/changelog.gz
          DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/${_pkg_doc} COMPONENT ${_pkg_component})
endforeach()

# The packages' Maintainer (Debian wants a name and an address): set it with
# -DTRANSPOSED_MAINTAINER="Name <address>"; deploy/debian/changelog names the same.
set(TRANSPOSED_MAINTAINER "transposed maintainers <transposed@example.org>"
    CACHE STRING "Maintainer of the Debian packages: Name <address>")

# Debian packages (`cpack -G DEB` in the build directory):
#   transposed      the daemon, CLI, worker, C ABI library, unit, sysusers.d entry, example
#                   configuration (/etc/transposed/transposed.toml, a conffile); Depends from
#                   dpkg-shlibdeps (runtime libraries only); postinst makes the system user.
#   transposed-dev  the static libraries, headers, CMake package, .pc file and .proto.
# Installed under /usr (CPACK_SET_DESTDIR: the install runs with prefix /usr, so the unit names
# /usr/bin/transposed). deploy/fresh-root-test.sh deb installs it into a fresh Debian 12 root.
if(PROJECT_IS_TOP_LEVEL)
  set(CPACK_PACKAGE_NAME transposed)
  set(CPACK_PACKAGE_VENDOR "transposed")
  set(CPACK_PACKAGE_CONTACT "${TRANSPOSED_MAINTAINER}")
  set(CPACK_GENERATOR DEB)
  set(CPACK_SET_DESTDIR ON)
  set(CPACK_INSTALL_PREFIX /usr)
  set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
  set(CPACK_STRIP_FILES ON)
  set(CPACK_COMPONENTS_ALL runtime dev)
  set(CPACK_DEB_COMPONENT_INSTALL ON)
  set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
  set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${TRANSPOSED_MAINTAINER}")
  set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
  set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME transposed)
  set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION net)
  # The first line of a description is the package's summary.
  set(CPACK_DEBIAN_RUNTIME_DESCRIPTION "auto-tuning gRPC daemon for GPU matrix transposition
transposed answers which transpose kernel configuration is fastest for a problem on a device,
tuning on a miss (a CUDA worker per GPU, or the CPU backend) and caching the winners.")
  set(_debian ${PROJECT_SOURCE_DIR}/deploy/debian)
  set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_EXTRA
      ${_debian}/conffiles ${_debian}/postinst ${_debian}/prerm ${_debian}/postrm
      ${_debian}/triggers)
  set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
  set(CPACK_DEBIAN_DEV_PACKAGE_NAME transposed-dev)
  set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
  set(CPACK_DEBIAN_DEV_DESCRIPTION "client and kernel libraries of transposed (development files)
Static libraries, headers, CMake package and pkg-config file of the transposed client
(transposed::Client) and transpose kernels.")
  set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
      "transposed (= ${PROJECT_VERSION}), libgrpc++-dev, libprotobuf-dev, nlohmann-json3-dev, protobuf-compiler-grpc")
  # protobuf-compiler-grpc: Debian's gRPC CMake package (find_dependency(gRPC CONFIG) in
  # transposedConfig.cmake) refuses to load without its grpc_cpp_plugin.
  include(CPack)
endif()
