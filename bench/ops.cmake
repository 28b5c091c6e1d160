# bench_ops: what operating the agent costs: the metrics op (by number of
# uncertain actions), the in-flight lease gauge on the begin path, backup
# (checkpoint), offline export and import throughput.
add_executable(bench_ops ${CMAKE_CURRENT_LIST_DIR}/ops_bench.cc)
target_link_libraries(bench_ops PRIVATE intentd_malloc intentd_cli intentd_protocol intentd_store Threads::Threads)
