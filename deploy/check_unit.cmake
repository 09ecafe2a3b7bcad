# Checks the systemd unit (deploy/transposed.service) for the limits the daemon depends on: a
# descriptor limit well above systemd's default soft limit of 1024 (every client connection holds
# a descriptor) and a restart when the daemon exits with an error (it exits 1 when it cannot
# listen again after an accept failure). Run by CTest as systemd_unit:
#   cmake -DUNIT=deploy/transposed.service -P deploy/check_unit.cmake
file(STRINGS "${UNIT}" lines)
set(nofile "")
set(restart "")
foreach(line IN LISTS lines)
  if(line MATCHES "^LimitNOFILE=(.*)$")
    set(nofile "${CMAKE_MATCH_1}")
  elseif(line MATCHES "^Restart=(.*)$")
    set(restart "${CMAKE_MATCH_1}")
  endif()
endforeach()
if(nofile STREQUAL "")
  message(FATAL_ERROR "${UNIT}: no LimitNOFILE= (systemd's default soft limit is 1024)")
endif()
if(NOT nofile STREQUAL "infinity")
  string(REGEX MATCH "^[0-9]+" soft "${nofile}")
  if(soft STREQUAL "" OR soft LESS 65536)
    message(FATAL_ERROR "${UNIT}: LimitNOFILE=${nofile}: want at least 65536")
  endif()
endif()
if(NOT restart MATCHES "^(on-failure|always)$")
  message(FATAL_ERROR "${UNIT}: Restart=${restart}: want on-failure or always")
endif()
message(STATUS "${UNIT}: LimitNOFILE=${nofile} Restart=${restart}")
