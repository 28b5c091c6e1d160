// jemalloc's settings for a program running the store, read by jemalloc when
// the program starts; MALLOC_CONF in the environment overrides them (e.g.
// MALLOC_CONF=thp:default in a unit's Environment= to keep every page small).
//
// thp:always: jemalloc asks for transparent huge pages (madvise) on its
// memory, so the memtables' skip lists, which RocksDB allocates in 8 MiB
// blocks, are walked with far fewer TLB misses and filled with 512 times
// fewer page faults. narenas:1: one arena for all threads (the agent has a
// handful; the io thread allocates what the sync thread frees), which also
// bounds what huge pages add to the resident size. Alternated with neither
// (intentd_loadgen, 64 connections): io thread 32.8 vs 37.5 us per request,
// peak resident 122 vs 92 MiB (bench/RESULTS.md, session 7).
extern "C" {
// NOLINTNEXTLINE: the name and type are jemalloc's interface.
const char* malloc_conf = "thp:always,narenas:1";
}
