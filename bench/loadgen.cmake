# intentd_loadgen: the logical flow begin -> complete against intentd, and the
# same flow against PostgreSQL (libpq) and Redis (hiredis) when their client
# libraries are installed (libpq-dev, libhiredis-dev); bench/run.sh drives it.
find_package(PostgreSQL QUIET)
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(HIREDIS QUIET IMPORTED_TARGET hiredis)
endif()

add_executable(intentd_loadgen
  ${CMAKE_CURRENT_LIST_DIR}/loadgen_main.cc
  ${CMAKE_CURRENT_LIST_DIR}/loadgen_runner.cc
  ${CMAKE_CURRENT_LIST_DIR}/loadgen_workload.cc
  ${CMAKE_CURRENT_LIST_DIR}/loadgen_io.cc
  ${CMAKE_CURRENT_LIST_DIR}/loadgen_intentd.cc
  ${CMAKE_CURRENT_LIST_DIR}/loadgen_client_key.cc
  ${CMAKE_CURRENT_LIST_DIR}/loadgen_cpu.cc
  ${CMAKE_CURRENT_LIST_DIR}/loadgen_batches.cc
  ${CMAKE_CURRENT_LIST_DIR}/loadgen_fsync_probe.cc
  ${CMAKE_CURRENT_LIST_DIR}/loadgen_spawn.cc)
target_link_libraries(intentd_loadgen PRIVATE intentd_normalizers nlohmann_json::nlohmann_json
                      Threads::Threads)
if(PostgreSQL_FOUND)
  target_sources(intentd_loadgen PRIVATE ${CMAKE_CURRENT_LIST_DIR}/loadgen_postgres.cc)
  target_link_libraries(intentd_loadgen PRIVATE PostgreSQL::PostgreSQL)
  target_compile_definitions(intentd_loadgen PRIVATE INTENTD_LOADGEN_POSTGRES)
endif()
if(HIREDIS_FOUND)
  target_sources(intentd_loadgen PRIVATE ${CMAKE_CURRENT_LIST_DIR}/loadgen_redis.cc)
  target_link_libraries(intentd_loadgen PRIVATE PkgConfig::HIREDIS)
  target_compile_definitions(intentd_loadgen PRIVATE INTENTD_LOADGEN_REDIS)
endif()

# Smoke check (about 4 s): a private agent, 8 connections, 2 s; fails on a
# redelivery told to execute, a failed request or an unclean agent exit.
if(INTENTD_BUILD_TESTS AND TARGET intentd)
  add_test(NAME bench.loadgen.smoke
           COMMAND intentd_loadgen --spawn-intentd $<TARGET_FILE:intentd> --connections 8
                   --duration 2 --warmup 0.5 --redeliveries 0.2)
  set_tests_properties(bench.loadgen.smoke PROPERTIES TIMEOUT 60 LABELS "bench")
  # --server-pid counts a server's ended children (loadgen_server_cpu_test.sh).
  add_test(NAME bench.loadgen.server_cpu
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/loadgen_server_cpu_test.sh
                   $<TARGET_FILE:intentd_loadgen> $<TARGET_FILE:intentd>)
  set_tests_properties(bench.loadgen.server_cpu PROPERTIES TIMEOUT 60 LABELS "bench")
  # The same against an agent on PostgreSQL, with its batches' figures
  # (loadgen_postgres_smoke.sh; skipped outside scripts/with-postgres.sh).
  add_test(NAME bench.loadgen.postgres_smoke
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/loadgen_postgres_smoke.sh
                   $<TARGET_FILE:intentd_loadgen> $<TARGET_FILE:intentd>)
  set_tests_properties(bench.loadgen.postgres_smoke
                       PROPERTIES TIMEOUT 60 LABELS "bench" SKIP_RETURN_CODE 77)
  # bench/run.sh itself at 2 connections, every system, --baseline, --fleet 2
  # and --pg-statements (about 20 s; run_test.sh). Its build step runs ninja
  # in this build tree, as the .deb's test does: not both at once.
  add_test(NAME bench.run
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/run_test.sh ${CMAKE_BINARY_DIR})
  set_tests_properties(bench.run PROPERTIES TIMEOUT 180 LABELS "bench" SKIP_RETURN_CODE 77
                                            RESOURCE_LOCK intentd_build_tree)
endif()
