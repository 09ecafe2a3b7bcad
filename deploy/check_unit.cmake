# Checks the systemd unit (deploy/transposed.service.in, filled in as the Debian package's install
# fills it: /usr/bin, /etc/transposed) for the limits the daemon depends on: a descriptor limit
# well above systemd's default soft limit of 1024 (every client connection holds a descriptor)
# and a restart when the daemon exits with an error (it exits 1 when it cannot listen again after
# an accept failure); Type=notify (the daemon says when it serves); and its hardening:
# `systemd-analyze security` must rate it at most 4.0
# (without systemd-analyze the check is skipped, except under CI). Run by CTest as systemd_unit:
#   cmake -DUNIT=deploy/transposed.service.in -DWORK=<dir> -P deploy/check_unit.cmake
set(TRANSPOSED_BINDIR /usr/bin)
set(TRANSPOSED_CONFDIR /etc/transposed)
configure_file("${UNIT}" "${WORK}/transposed.service" @ONLY)
set(UNIT "${WORK}/transposed.service")
file(STRINGS "${UNIT}" lines)
set(nofile "")
set(restart "")
set(type "")
foreach(line IN LISTS lines)
  if(line MATCHES "^Type=(.*)$")
    set(type "${CMAKE_MATCH_1}")
  elseif(line MATCHES "^LimitNOFILE=(.*)$")
    set(nofile "${CMAKE_MATCH_1}")
  elseif(line MATCHES "^Restart=(.*)$")
    set(restart "${CMAKE_MATCH_1}")
  endif()
endforeach()
# The daemon says READY=1 once it serves (server/daemon/notify.h; CTest notify_test).
if(NOT type STREQUAL "notify")
  message(FATAL_ERROR "${UNIT}: Type=${type}: want notify (the daemon tells systemd when it serves)")
endif()
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

# At most 4.0 ("OK"); systemd-analyze's threshold is the exposure times 10.
find_program(SYSTEMD_ANALYZE systemd-analyze)
if(NOT SYSTEMD_ANALYZE)
  if(NOT "$ENV{CI}" STREQUAL "")
    message(FATAL_ERROR "systemd-analyze is missing (CI installs systemd: deploy/install-deps.sh --ci)")
  endif()
  message(STATUS "SKIPPED: the exposure rating (no systemd-analyze)")
  return()
endif()
execute_process(COMMAND ${SYSTEMD_ANALYZE} security --offline=true --threshold=40 ${UNIT}
                WORKING_DIRECTORY ${WORK} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE out)
string(REGEX MATCH "Overall exposure level[^\n]*" overall "${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${UNIT}: systemd-analyze security rates it above 4.0:\n${out}")
endif()
message(STATUS "${overall}")
