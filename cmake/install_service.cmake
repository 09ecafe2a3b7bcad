# Install-time part of cmake/transposed_install.cmake: the systemd unit, the sysusers.d entry and
# the example configuration, with the paths of the prefix being installed to. It runs when the
# install runs (`cmake --install build --prefix P`, CPack with DESTDIR), so the unit's ExecStart
# and --config name what that install puts there, not what the prefix was at configure time.
#   TRANSPOSED_SOURCE_DIR, TRANSPOSED_INSTALL_BINDIR (relative), TRANSPOSED_STAGE_DIR: set by the
#   install(CODE) that includes this file; CMAKE_INSTALL_PREFIX and DESTDIR: the install's.
# The configuration goes to /etc/transposed for prefix /usr (GNUInstallDirs' rule), else to
# PREFIX/etc/transposed; the unit and sysusers.d file to PREFIX/lib/{systemd/system,sysusers.d}.
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set(_etc /etc)
else()
  set(_etc ${CMAKE_INSTALL_PREFIX}/etc)
endif()
set(TRANSPOSED_BINDIR ${CMAKE_INSTALL_PREFIX}/${TRANSPOSED_INSTALL_BINDIR})
set(TRANSPOSED_CONFDIR ${_etc}/transposed)
set(_stage ${TRANSPOSED_STAGE_DIR})
configure_file(${TRANSPOSED_SOURCE_DIR}/deploy/transposed.service.in
               ${_stage}/transposed.service @ONLY)
file(WRITE ${_stage}/transposed.conf
     "# The system user of transposed.service (systemd-sysusers).\n"
     "u transposed - \"transposed daemon\" /var/lib/transposed\n")
# file(INSTALL) prepends DESTDIR itself.
file(INSTALL ${_stage}/transposed.service DESTINATION "${CMAKE_INSTALL_PREFIX}/lib/systemd/system")
file(INSTALL ${_stage}/transposed.conf DESTINATION "${CMAKE_INSTALL_PREFIX}/lib/sysusers.d")
# An existing configuration is the operator's: never overwritten (the Debian package marks it a
# conffile, so dpkg asks instead).
if(EXISTS "$ENV{DESTDIR}${TRANSPOSED_CONFDIR}/transposed.toml")
  message(STATUS "Keeping: $ENV{DESTDIR}${TRANSPOSED_CONFDIR}/transposed.toml")
else()
  file(INSTALL ${TRANSPOSED_SOURCE_DIR}/deploy/transposed.toml DESTINATION "${TRANSPOSED_CONFDIR}")
endif()
