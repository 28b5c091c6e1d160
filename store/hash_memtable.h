// A RocksDB memtable representation for stores written by one thread at a
// time: a hash index over the whole user key for point reads, and the
// entries in insertion order, sorted once when something iterates (a flush).
//
// Why not RocksDB's hash skip list (NewHashSkipListRepFactory, used before)?
// Its flush iterator builds a new skip list of every entry (by estimate ~34
// comparisons per entry, most of them cache misses, for the ~150,000
// entries of a full memtable at branching factor 4): the flush thread took
// 21.5% of all samples under bench_store --threads=64 (perf record -a). And
// Debian's librocksdb is built with assertions on, so each insert also ran
// `assert(!Contains(key))`, a second lookup. Here an insert links one node
// into a short hash chain and appends it to an array; a flush sorts that
// array (std::sort over contiguous pointers, no allocation per entry):
// the flush thread fell to 1.4% of the samples (same command).
//
// Contract (rocksdb/memtablerep.h): inserts never run concurrently with each
// other (the factory does not support concurrent inserts, so RocksDB
// serializes them: allow_concurrent_memtable_write must be false); Get,
// Contains and iterators may run concurrently with an insert and with each
// other. An iterator sees the entries inserted before it was created (on the
// mutable memtable it sorts a copy, as RocksDB's vector memtable does; keep
// such scans rare). Entries of one user key are returned newest first, and
// Get skips those newer than the lookup's sequence number, as a skip list's
// Seek would.
#pragma once

#include <rocksdb/memtablerep.h>

#include <cstddef>

namespace intentd::store {

// A new factory, owned by the caller (give it to a shared_ptr, as
// ColumnFamilyOptions::memtable_factory). `buckets` is rounded up to a power
// of two. The bucket array (8 bytes per bucket) is counted in each
// memtable's memory, as the hash skip list's was.
rocksdb::MemTableRepFactory* NewHashSortMemTableFactory(size_t buckets);

}  // namespace intentd::store
