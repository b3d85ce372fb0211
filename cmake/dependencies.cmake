# Every dependency comes from Debian's packages and is found by CMake's own mechanisms.
find_package(PkgConfig REQUIRED)
pkg_check_modules(rdkafka REQUIRED IMPORTED_TARGET rdkafka>=2.0)
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
