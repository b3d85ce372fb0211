# Every dependency comes from Debian's packages and is found by CMake's own mechanisms; librdkafka
# from Debian's source package of a newer suite, which scripts/setup.sh builds into
# .deps/librdkafka/<version> (third_party/librdkafka/source.env). It is linked statically
# (rdkafka-static.pc: librdkafka.a, then Debian's shared libssl, libsasl2, libcurl, libzstd, liblz4
# and zlib), so the binary, the .deb and the image need no librdkafka of their own.
find_package(PkgConfig REQUIRED)
file(STRINGS "${PROJECT_SOURCE_DIR}/third_party/librdkafka/source.env" rdkafka_source_version
     REGEX "^LIBRDKAFKA_VERSION=")
string(REGEX REPLACE "^LIBRDKAFKA_VERSION=" "" rdkafka_source_version "${rdkafka_source_version}")
set(PGOUTBOX_RDKAFKA_PREFIX "${PROJECT_SOURCE_DIR}/.deps/librdkafka/${rdkafka_source_version}"
    CACHE PATH "Prefix of the librdkafka that scripts/setup.sh built")
if(NOT EXISTS "${PGOUTBOX_RDKAFKA_PREFIX}/lib/pkgconfig/rdkafka-static.pc")
  message(FATAL_ERROR "librdkafka ${rdkafka_source_version} not found in ${PGOUTBOX_RDKAFKA_PREFIX}; run scripts/setup.sh")
endif()
set(ENV{PKG_CONFIG_PATH} "${PGOUTBOX_RDKAFKA_PREFIX}/lib/pkgconfig")
pkg_check_modules(rdkafka REQUIRED rdkafka-static>=2.8)
# The .pc names librdkafka.a by its path, which an IMPORTED_TARGET would put among the link options,
# ahead of the objects that need it; an imported static library keeps the link order right.
pkg_check_modules(rdkafka_deps REQUIRED IMPORTED_TARGET zlib libcrypto libssl libsasl2 libzstd libcurl liblz4)
find_package(Threads REQUIRED)
add_library(rdkafka::rdkafka STATIC IMPORTED)
set_target_properties(rdkafka::rdkafka PROPERTIES
  IMPORTED_LOCATION "${PGOUTBOX_RDKAFKA_PREFIX}/lib/librdkafka.a"
  INTERFACE_INCLUDE_DIRECTORIES "${PGOUTBOX_RDKAFKA_PREFIX}/include"
  INTERFACE_LINK_LIBRARIES "PkgConfig::rdkafka_deps;Threads::Threads;m;dl;rt")
pkg_check_modules(libpq REQUIRED IMPORTED_TARGET libpq>=15)
find_package(Threads REQUIRED)
find_package(Boost 1.74 REQUIRED)
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
find_package(simdjson REQUIRED)
find_package(prometheus-cpp REQUIRED COMPONENTS core pull)
find_package(yaml-cpp REQUIRED)
find_package(CLI11 REQUIRED)
find_package(OpenSSL REQUIRED COMPONENTS Crypto)  # SHA-256 of dead-lettered values
# The daemon's allocator (src/app/CMakeLists.txt): every record is a few short-lived allocations
# in the relay and more in librdkafka, and glibc's malloc took a third of the main thread there.
# Not under the sanitizers, which bring their own.
if(NOT PGOUTBOX_SANITIZE)
  pkg_check_modules(jemalloc REQUIRED IMPORTED_TARGET jemalloc)
endif()
if(PGOUTBOX_BUILD_TESTS)
  find_package(GTest REQUIRED)
  # Tests and benchmarks start their own PostgreSQL 15 server and Kafka broker (JVM).
  execute_process(COMMAND pg_config --bindir OUTPUT_VARIABLE PG_BINDIR OUTPUT_STRIP_TRAILING_WHITESPACE
                  RESULT_VARIABLE pg_config_rc)
  if(NOT pg_config_rc EQUAL 0 OR NOT EXISTS "${PG_BINDIR}/initdb")
    message(FATAL_ERROR "PostgreSQL server binaries not found through pg_config (${PG_BINDIR}); run scripts/setup.sh")
  endif()
  # Its major, so that PGOUTBOX_TEST_PG_MAJOR naming it needs nothing from .deps/postgres.
  execute_process(COMMAND "${PG_BINDIR}/postgres" --version OUTPUT_VARIABLE pg_server_version
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  string(REGEX MATCH "[0-9]+" PG_SYSTEM_MAJOR "${pg_server_version}")
  find_program(JAVA_EXECUTABLE java REQUIRED)
endif()
