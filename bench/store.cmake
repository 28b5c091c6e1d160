# bench_store: begin+complete throughput with synced writes, point-read
# latency over a bulk-loaded store, on-disk bytes per completed action.
add_executable(bench_store ${CMAKE_CURRENT_LIST_DIR}/store_bench.cc)
target_link_libraries(bench_store PRIVATE intentd_malloc intentd_store Threads::Threads)
