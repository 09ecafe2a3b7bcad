# Generates the kernel library version at build time (run by the custom command in
# core/CMakeLists.txt with `cmake -P`): the project version plus a hash of the sources that define
# the candidates, the search and the measurements, so that any edit to them changes every device
# fingerprint (and so never serves a stale winner).
#   -DROOT=<source dir> -DLIST=<file naming the hashed sources, one per line>
#   -DIN=<template with @TRANSPOSED_LIBRARY_VERSION@> -DOUT=<generated file> -DPROJECT_VERSION=<x.y.z>
# OUT is rewritten only when its content changes, so an unchanged hash recompiles nothing.
foreach(v ROOT LIST OUT PROJECT_VERSION)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "library_version.cmake: -D${v}=... is required")
  endif()
endforeach()
if(NOT DEFINED IN)
  message(FATAL_ERROR "library_version.cmake: -DIN=... is required")
endif()
file(STRINGS "${LIST}" _files)
set(_acc "")
foreach(f IN LISTS _files)
  if(NOT EXISTS "${f}")
    message(FATAL_ERROR "library_version.cmake: ${f} does not exist (re-run cmake)")
  endif()
  file(SHA256 "${f}" _h)
  file(RELATIVE_PATH _rel "${ROOT}" "${f}")
  string(APPEND _acc "${_rel} ${_h}\n")
endforeach()
string(SHA256 _hash "${_acc}")
string(SUBSTRING "${_hash}" 0 10 _hash)
set(TRANSPOSED_LIBRARY_VERSION "${PROJECT_VERSION}+k${_hash}")
configure_file("${IN}" "${OUT}" @ONLY)
