# The Debian package: `cmake --build --preset release --target deb` writes
# build/<preset>/package/pgoutbox_<version>_<arch>.deb with the binary, its man page (help2man, from
# the binary's --help), the example configuration as the conffile /etc/pgoutbox/pgoutbox.yaml,
# /etc/default/pgoutbox for secrets, the systemd units (deploy/systemd), sql/ and the Prometheus
# alert rules under /usr/share/pgoutbox, and the docs. deploy/debian holds the maintainer scripts.
#
# The files that belong under /etc and /lib/systemd install to those absolute paths (CPack stages
# them under DESTDIR), the rest under the install prefix (/usr in the package).
include(GNUInstallDirs)

set(PGOUTBOX_DEB_DIR ${PROJECT_SOURCE_DIR}/deploy/debian)
set(PGOUTBOX_GEN_DIR ${PROJECT_BINARY_DIR}/packaging)
file(MAKE_DIRECTORY ${PGOUTBOX_GEN_DIR})

install(TARGETS pgoutbox RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${PROJECT_SOURCE_DIR}/config/pgoutbox.example.yaml DESTINATION /etc/pgoutbox RENAME pgoutbox.yaml)
install(FILES ${PGOUTBOX_DEB_DIR}/default DESTINATION /etc/default RENAME pgoutbox)
install(FILES ${PROJECT_SOURCE_DIR}/deploy/systemd/pgoutbox.service ${PROJECT_SOURCE_DIR}/deploy/systemd/pgoutbox@.service
        DESTINATION /lib/systemd/system)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/sql/ DESTINATION ${CMAKE_INSTALL_DATADIR}/pgoutbox/sql FILES_MATCHING PATTERN "*.sql")
install(FILES ${PROJECT_SOURCE_DIR}/deploy/prometheus/alerts.yaml DESTINATION ${CMAKE_INSTALL_DATADIR}/pgoutbox/prometheus)
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/docs/runbook.md ${PROJECT_SOURCE_DIR}/docs/configuration.md
              ${PGOUTBOX_DEB_DIR}/copyright
        DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/pgoutbox)
# librdkafka is linked in statically: its licence (BSD-2-Clause) and those of the code it bundles
# travel with the binary.
install(FILES ${PGOUTBOX_RDKAFKA_PREFIX}/LICENSES.txt DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/pgoutbox
        RENAME librdkafka-LICENSES.txt)

# The man page and the changelog, gzipped reproducibly (-n: no name or timestamp).
find_program(PGOUTBOX_HELP2MAN help2man)
set(PGOUTBOX_MAN ${PGOUTBOX_GEN_DIR}/pgoutbox.1.gz)
if(PGOUTBOX_HELP2MAN)
  add_custom_command(
    OUTPUT ${PGOUTBOX_MAN}
    COMMAND ${PGOUTBOX_HELP2MAN} --no-info --section=1 --source=pgoutbox
            "--name=relay transactional-outbox rows from PostgreSQL to Kafka"
            --include=${PGOUTBOX_DEB_DIR}/pgoutbox.h2m --output=${PGOUTBOX_GEN_DIR}/pgoutbox.1 $<TARGET_FILE:pgoutbox>
    COMMAND gzip -9nf ${PGOUTBOX_GEN_DIR}/pgoutbox.1
    DEPENDS pgoutbox ${PGOUTBOX_DEB_DIR}/pgoutbox.h2m
    COMMENT "Generating the man page with help2man"
    VERBATIM)
else()
  add_custom_command(
    OUTPUT ${PGOUTBOX_MAN}
    COMMAND ${CMAKE_COMMAND} -E echo "help2man is missing: run scripts/setup.sh"
    COMMAND ${CMAKE_COMMAND} -E false
    VERBATIM)
endif()
set(PGOUTBOX_CHANGELOG ${PGOUTBOX_GEN_DIR}/changelog.gz)
add_custom_command(
  OUTPUT ${PGOUTBOX_CHANGELOG}
  COMMAND sh -c "gzip -9nc '${PGOUTBOX_DEB_DIR}/changelog' > '${PGOUTBOX_CHANGELOG}'"
  DEPENDS ${PGOUTBOX_DEB_DIR}/changelog
  VERBATIM)
add_custom_target(pgoutbox_package_files DEPENDS ${PGOUTBOX_MAN} ${PGOUTBOX_CHANGELOG})
install(FILES ${PGOUTBOX_MAN} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 OPTIONAL)
install(FILES ${PGOUTBOX_CHANGELOG} DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/pgoutbox OPTIONAL)

set(CPACK_PACKAGE_NAME pgoutbox)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "transactional outbox relay from PostgreSQL to Kafka")
set(CPACK_PACKAGE_CONTACT "pgoutbox maintainers <maintainers@users.noreply.a-seed-3c008b2f.example>")
set(CPACK_PACKAGE_DIRECTORY ${PROJECT_BINARY_DIR}/package)
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser")
set(CPACK_DEBIAN_PACKAGE_GENERATE_MD5SUMS ON)
# CPack puts the summary first and indents these lines itself (an empty line becomes " .").
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
    "pgoutbox reads the rows applications insert into outbox tables from a
PostgreSQL logical replication slot (pgoutput) and publishes each to Kafka.
It confirms a WAL position only after Kafka acknowledged every event before
it, so crashes and outages lose nothing.

The package ships a hardened systemd unit (pgoutbox.service, and the
pgoutbox@.service template for several slots on one host), the SQL scripts,
Prometheus alert rules and a runbook.")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${PGOUTBOX_DEB_DIR}/postinst ${PGOUTBOX_DEB_DIR}/prerm ${PGOUTBOX_DEB_DIR}/postrm ${PGOUTBOX_DEB_DIR}/conffiles)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_GENERATOR DEB)
include(CPack)

add_custom_target(deb
  COMMAND ${CMAKE_CPACK_COMMAND} -G DEB --config ${PROJECT_BINARY_DIR}/CPackConfig.cmake
  WORKING_DIRECTORY ${PROJECT_BINARY_DIR}
  COMMENT "Building the Debian package into ${PROJECT_BINARY_DIR}/package"
  VERBATIM)
add_dependencies(deb pgoutbox pgoutbox_package_files)
