# pgoutbox_add_test(NAME <name> LABEL unit|integration|fault|security SOURCES ... [LIBS ...] [TIMEOUT s]
#                   [COST s])
#
# One test binary is one CTest test, so the services a binary starts (one Postgres, one Kafka)
# are shared by all of its cases. Labels select the kind: `ctest -L unit` needs no services;
# `security` is the hostile-input suite (tests/security), which does start services.
function(pgoutbox_add_test)
  cmake_parse_arguments(T "" "NAME;LABEL;TIMEOUT;COST" "SOURCES;LIBS" ${ARGN})
  if(NOT T_LABEL MATCHES "^(unit|integration|fault|security)$")
    message(FATAL_ERROR "pgoutbox_add_test(${T_NAME}): LABEL must be unit, integration, fault or security")
  endif()
  if(NOT T_TIMEOUT)
    if(T_LABEL STREQUAL "unit")
      set(T_TIMEOUT 60)
    else()
      set(T_TIMEOUT 600)
    endif()
  endif()
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main)
  add_test(NAME ${T_NAME} COMMAND ${T_NAME} --gtest_color=no)
  set_tests_properties(${T_NAME} PROPERTIES LABELS ${T_LABEL} TIMEOUT ${T_TIMEOUT})
  if(T_COST)
    # Its usual length in seconds: ctest starts the longest first, so that on a clean clone (no
    # timings recorded yet) they do not end the run alone.
    set_tests_properties(${T_NAME} PROPERTIES COST ${T_COST})
  endif()
  # Tests run in parallel (the test presets' jobs): most of a service test's time is spent
  # waiting on a broker or a fault, and each one starts services of its own on ports no other
  # test process holds (free_loopback_port, tests/support/child_process.h).
endfunction()
