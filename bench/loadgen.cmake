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
  ${CMAKE_CURRENT_LIST_DIR}/loadgen_fsync_probe.cc)
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
