# Line server round trips: closed-loop clients over the Unix socket, echo-like
# handler. Prints lines/s and latency percentiles.
add_executable(bench_transport ${CMAKE_CURRENT_LIST_DIR}/transport_bench.cc)
target_link_libraries(bench_transport PRIVATE intentd_transport Threads::Threads)
