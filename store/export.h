// Offline export and import of a RocksDB store's records, for moving a store
// between hosts or versions and for audits (`intentd export` / `import`).
// Implemented by the RocksDB store (rocks/export.cc): the file format and
// its records are backend-neutral, the directory read and written is a
// RocksDB store's.
//
// Both work on a store directory that no agent is using: they take the
// store's LOCK file first and fail with kBusy while an agent holds it (take
// an online checkpoint with RocksStore::Checkpoint and export that instead).
// The lease index and the store's meta records are not exported: import
// rebuilds the index from the started actions it writes.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "store/clock.h"
#include "store/status.h"
#include "store/store.h"

namespace intentd::store {

// One stored record with every field, and its retention deadline (the
// compaction filter drops it after retain_until_ms; kRetainForever for a
// started action and the intents that point at it).
struct ExportRecord {
  enum class Kind { kIntent, kAction, kCounter };
  Kind kind = Kind::kIntent;
  Intent intent;    // kind == kIntent
  Action action;    // kind == kAction
  Counter counter;  // kind == kCounter: a policy's daily allowance counter
  int64_t retain_until_ms = 0;
};

struct OfflineOptions {
  std::string path;              // the store directory
  const Clock* clock = nullptr;  // decides which records are past retention; nullptr: system
};

struct ExportCounts {
  uint64_t intents = 0;
  uint64_t actions = 0;
  uint64_t counters = 0;
  uint64_t expired = 0;  // past retention, not yet compacted away: not visited
};

// Calls `visit` for every live record of the store at options.path: every
// intent (in key order), then every action, then every allowance counter. Opens the store read-only
// and writes nothing to it. A non-ok Status returned by `visit` stops the export and is returned.
// kBusy: the store is in use; kNotFound: no store there; kCorruption: a record cannot be decoded
// (the export stops: nothing is silently skipped).
Status ExportStore(const OfflineOptions& options,
                   const std::function<Status(const ExportRecord&)>& visit, ExportCounts* counts);

// Writes records into the store at options.path (created when absent).
// Idempotent: a record that is already stored with the same content (its
// retention aside) is left as it is, so importing the same export twice
// changes nothing. A stored record that differs is a conflict and is kept:
// import never overwrites.
//
// Not thread-safe; one importer per store, holding it exclusively.
class StoreImporter {
 public:
  enum class Outcome {
    kAdded,
    kUnchanged,  // stored already, same content
    kConflict,   // stored already, different content: kept
    kExpired,    // past retention at import time: not written
  };

  // kBusy: the store is in use. Other errors as RocksStore::Open.
  static Status Open(const OfflineOptions& options, std::unique_ptr<StoreImporter>* importer);
  virtual ~StoreImporter() = default;

  // Writes one record (unsynced) unless it is stored already. A started
  // action also gets its lease index entries. kInvalidArgument: a record
  // without the fields that make its key (empty tenant_id, key, ...).
  virtual Status Add(const ExportRecord& record, Outcome* outcome) = 0;

  // Makes everything added durable (synced WAL, flushed tables).
  virtual Status Finish() = 0;
};

}  // namespace intentd::store
