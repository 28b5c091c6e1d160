# Key derivation throughput (pix.cobranca, rules versions 1 and 2).
if(benchmark_FOUND)
  add_executable(bench_key_derivation ${CMAKE_CURRENT_LIST_DIR}/key_derivation_bench.cc)
  target_link_libraries(bench_key_derivation PRIVATE intentd_normalizers
                        nlohmann_json::nlohmann_json benchmark::benchmark)
endif()
