// Storage faults on demand, for tests of the store's error paths (and of
// callers that map kStorageError). Only RocksDB's FileSystem is named here,
// declared, for tests that wrap one themselves.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "store/rocks/rocks_store.h"

namespace rocksdb {
class FileSystem;
}

namespace intentd::store {

// Shared between a test and the store's file system; thread safe.
class FaultInjection {
 public:
  enum class Fault { kNone, kNoSpace, kIOError };
  // Fails every append to any file of the store (WAL, tables, manifest).
  void SetWriteFault(Fault fault) { write_fault_.store(fault); }
  // Fails every fsync / fdatasync of the store's files.
  void SetSyncFault(Fault fault) { sync_fault_.store(fault); }
  void Clear() {
    SetWriteFault(Fault::kNone);
    SetSyncFault(Fault::kNone);
  }
  Fault write_fault() const { return write_fault_.load(); }
  Fault sync_fault() const { return sync_fault_.load(); }
  // How many operations failed because of this object.
  int64_t injected() const { return injected_.load(); }
  void CountInjected() { injected_.fetch_add(1); }

 private:
  std::atomic<Fault> write_fault_{Fault::kNone};
  std::atomic<Fault> sync_fault_{Fault::kNone};
  std::atomic<int64_t> injected_{0};
};

// `base`, with writes and syncs failing on demand.
std::shared_ptr<rocksdb::FileSystem> NewFaultInjectionFileSystem(
    std::shared_ptr<rocksdb::FileSystem> base, std::shared_ptr<FaultInjection> faults);

// RocksStore::Open on a file system that consults `faults` before each write.
Status OpenWithFaultInjection(const RocksOptions& options, std::shared_ptr<FaultInjection> faults,
                              std::unique_ptr<RocksStore>* store);

}  // namespace intentd::store
