// Opening a store: directory checks, format probe, read-write and read-only
// opens. Nothing is written to a directory until every check passed.
#include <rocksdb/file_system.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <system_error>

#include "store/rocks/codec.h"
#include "store/rocks/impl.h"
#include "store/rocks/options.h"

namespace intentd::store {
namespace {

// RocksDB reports a held LOCK file as an I/O error: "While lock file: ..."
// (another process) or "lock hold by current process" (this one).
bool IsLockError(const rocksdb::Status& s) {
  const std::string text = s.ToString();
  return s.IsIOError() && (text.find("While lock file") != std::string::npos ||
                           text.find("lock hold by current process") != std::string::npos);
}

// A directory may receive a new store when it is absent, empty, or holds only
// what an interrupted creation leaves before CURRENT is written. Anything
// else (tables, WAL, foreign files) is refused: creating over it would delete
// or mix with data that cannot be read.
Status CheckFreshDirectory(const std::string& path) {
  std::error_code ec;
  auto st = std::filesystem::status(path, ec);
  if (!std::filesystem::exists(st)) {
    std::filesystem::create_directories(path, ec);
    if (ec) {
      return Status::StorageError("cannot create store directory " + path + ": " + ec.message());
    }
    return Status::Ok();
  }
  if (!std::filesystem::is_directory(st)) {
    return Status::InvalidArgument("store path " + path + " is not a directory");
  }
  for (const auto& entry : std::filesystem::directory_iterator(path, ec)) {
    const std::string name = entry.path().filename().string();
    const bool leftover =
        name == "LOCK" || name == "IDENTITY" || name == "LOG" || name.rfind("LOG.old.", 0) == 0;
    if (!leftover) {
      return Status::Corruption("store directory " + path + " holds '" + name +
                                "' but no CURRENT file: not a store, or a damaged one; refusing "
                                "to create a store over it");
    }
  }
  if (ec) return Status::StorageError("cannot list store directory " + path + ": " + ec.message());
  return Status::Ok();
}

Status Unreadable(const rocksdb::Status& rs, const std::string& path) {
  if (rs.IsIOError() && !rs.IsPathNotFound()) return FromRocks(rs, "read store " + path);
  return Status::Corruption("store " + path + " is unreadable: " + rs.ToString());
}

// Fills the column family pointers from h->all.
Status AssignHandles(const std::string& path, DbHandles* h) {
  for (auto* handle : h->all) {
    const std::string& name = handle->GetName();
    if (name == kIntentsCf) h->intents = handle;
    if (name == kActionsCf) h->actions = handle;
    if (name == kLeasesCf) h->leases = handle;
    if (name == kMetaCf) h->meta = handle;
    if (name == kMessagesCf) h->messages = handle;
    if (name == kPolicyCf) h->policy = handle;
  }
  // A store older than format 4 has no messages column family until it is
  // opened for writing (OpenDb creates it); read-only it has none.
  if (h->intents == nullptr || h->actions == nullptr || h->leases == nullptr ||
      h->meta == nullptr || (h->messages == nullptr && !h->read_only) ||
      (h->policy == nullptr && !h->read_only)) {
    CloseDb(h);
    return Status::Corruption("store " + path + " lacks a column family");
  }
  return Status::Ok();
}

// Keeps the lines of RocksDB's log that report damage found by a replay, to
// quote them to the operator (their wording is RocksDB's: shown, never
// parsed). Writes nothing.
class DamageLogger : public rocksdb::Logger {
 public:
  using rocksdb::Logger::Logv;
  void Logv(const char* format, va_list ap) override {
    char line[512];
    va_list copy;
    va_copy(copy, ap);
    const int n = std::vsnprintf(line, sizeof(line), format, copy);
    va_end(copy);
    if (n <= 0) return;
    const std::string text(line, std::min<size_t>(static_cast<size_t>(n), sizeof(line) - 1));
    if (text.find("Corruption") == std::string::npos &&
        text.find("dropping") == std::string::npos) {
      return;
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (lines_.size() < 3) lines_.push_back(text);
  }
  std::string Quote() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::string out;
    for (const std::string& l : lines_) out += (out.empty() ? "" : " | ") + l;
    return out;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> lines_;
};

// Opens an existing store read-only: writes nothing to its directory. Its
// WAL replay, in `mode`, skips `voids` (h->replay says what it held).
Status OpenReadOnly(const std::string& path, const rocksdb::DBOptions& base,
                    const CfOptionsFactory& cfs, const std::vector<CommitRange>& voids,
                    rocksdb::WALRecoveryMode mode, std::shared_ptr<rocksdb::Logger> logger,
                    DbHandles* h) {
  std::vector<std::string> names;
  rocksdb::Status rs = rocksdb::DB::ListColumnFamilies(base, path, &names);
  if (!rs.ok()) return Unreadable(rs, path);
  bool has_meta = false;
  for (const auto& n : names) has_meta |= n == kMetaCf;
  if (!has_meta) {
    return Status::Corruption(path +
                              " is a RocksDB database but not an intentd store "
                              "(no meta column family)");
  }
  DbHandles opened;
  opened.replay = std::make_shared<ReplayFilter>(voids);
  rocksdb::DBOptions ro = base;
  ro.info_log = logger ? std::move(logger) : NewNullLogger();
  ro.wal_recovery_mode = mode;
  ro.wal_filter = opened.replay.get();
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (const auto& n : names) descriptors.emplace_back(n, cfs.For(n));
  rs = rocksdb::DB::OpenForReadOnly(ro, path, descriptors, &opened.all, &opened.db);
  if (!rs.ok()) return Unreadable(rs, path);
  opened.read_only = true;
  Status s = AssignHandles(path, &opened);
  if (!s.ok()) return s;
  *h = std::move(opened);
  return Status::Ok();
}

bool IsEmpty(const DbHandles& h) {
  for (auto* handle : h.all) {
    std::unique_ptr<rocksdb::Iterator> it(h.db->NewIterator(TotalOrderRead(), handle));
    it->SeekToFirst();
    if (it->Valid() || !it->status().ok()) return false;
  }
  return true;
}

// What a read-only replay of an existing store found.
struct Probe {
  bool unformatted = false;  // its creation stopped before the format was written; empty
  int format = 0;            // 1 to kFormatVersion otherwise
  std::string identity;
  uint64_t latest_seq = 0;
  std::vector<CommitStamp> replayed;
  uint64_t highest_commit = 0;
  std::string damage;  // RocksDB's own lines about damage it met
};

// Replays the store read-only in `mode` and checks its format version.
Status ProbeStore(const std::string& path, const rocksdb::DBOptions& base,
                  const CfOptionsFactory& cfs, const std::vector<CommitRange>& voids,
                  rocksdb::WALRecoveryMode mode, Probe* probe) {
  auto logger = std::make_shared<DamageLogger>();
  DbHandles h;
  Status s = OpenReadOnly(path, base, cfs, voids, mode, logger, &h);
  if (!s.ok()) return s;
  probe->damage = logger->Quote();
  probe->latest_seq = h.db->GetLatestSequenceNumber();
  probe->replayed = h.replay->replayed();
  probe->highest_commit = h.replay->highest();
  if (!h.db->GetDbIdentity(probe->identity).ok()) probe->identity.clear();
  std::string text;
  rocksdb::Status rs = h.db->Get(rocksdb::ReadOptions(), h.meta, kFormatVersionKey, &text);
  if (rs.IsNotFound()) {
    probe->unformatted = IsEmpty(h);
    if (!probe->unformatted) {
      s = Status::Corruption("store " + path + " has records but no format version");
    }
  } else if (!rs.ok()) {
    s = FromRocks(rs, "read store format of " + path);
  } else if (text.empty() || text.size() > 9 ||
             text.find_first_not_of("0123456789") != std::string::npos || std::stoi(text) < 1) {
    s = Status::Corruption("store " + path + " has an unreadable format version '" + text + "'");
  } else if (std::stoi(text) > kFormatVersion) {
    s = Status::Incompatible("store " + path + " has format version " + text +
                             ", newer than this intentd's " + std::to_string(kFormatVersion) +
                             "; run a newer intentd (nothing was changed)");
  } else {
    probe->format = std::stoi(text);
  }
  CloseDb(&h);
  return s;
}

// RocksDB names its WAL files NNNNNN.log (wal_files.h pins it).
bool IsWalFileName(const std::string& name) {
  constexpr std::string_view kSuffix = ".log";
  return name.size() > kSuffix.size() &&
         name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0 &&
         std::all_of(name.begin(), name.end() - kSuffix.size(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

// Copies the WAL files (and what says which of them count: CURRENT, the
// MANIFEST) into `path`/wal-damaged-<ms>/, before an open that accepts their
// loss replays and deletes them. "" or what failed.
std::string KeepDamagedWal(const std::string& path, int64_t now_ms, std::string* kept) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path dest = fs::path(path) / ("wal-damaged-" + std::to_string(now_ms));
  fs::create_directories(dest, ec);
  if (ec) return "cannot create " + dest.string() + ": " + ec.message();
  for (const auto& entry : fs::directory_iterator(path, ec)) {
    const std::string name = entry.path().filename().string();
    if (!IsWalFileName(name) && name != "CURRENT" && name.rfind("MANIFEST-", 0) != 0) continue;
    fs::copy_file(entry.path(), dest / name, ec);
    if (ec) return "cannot copy " + entry.path().string() + ": " + ec.message();
  }
  if (ec) return "cannot list " + path + ": " + ec.message();
  *kept = dest.string();
  return "";
}

// Decides, from the replays of an existing store, whether its WAL can be
// opened: refused (kCorruption) when the replay would drop writes that
// were acknowledged; else *voids gains what a torn tail left after its gap
// (nothing there was acknowledged, and PIT recovery would replay it past
// zeros a WAL spare left), and *outcome says what was dropped.
Status JudgeWal(const std::string& path, const rocksdb::DBOptions& base,
                const CfOptionsFactory& cfs, const RocksOptions& options,
                const WalGuard::State* guard, const Probe& skip_any,
                std::vector<CommitRange>* voids, OpenOutcome* outcome) {
  const GapReport gaps = FindGaps(skip_any.replayed, *voids);
  std::vector<std::string> losses;
  if (gaps.damaged_after != 0) {
    losses.push_back(
        "commits " + std::to_string(gaps.damaged_after + 1) + " to " +
        std::to_string(gaps.damaged_next - 1) + " are missing from the WAL, yet the " +
        std::to_string(gaps.records_after_damage) +
        " records after them were written once they were durable: acknowledged writes were "
        "damaged (a damaged record with valid ones after it, or a WAL file missing from the "
        "sequence), and a replay would drop them and those " +
        std::to_string(gaps.records_after_damage) + " records");
    voids->push_back(CommitRange{gaps.damaged_after, skip_any.highest_commit});
  } else if (gaps.torn) {
    voids->push_back(CommitRange{gaps.torn_after, skip_any.highest_commit});
    outcome->notice = "the WAL ends in a torn tail after commit " +
                      std::to_string(gaps.torn_after) + ": " +
                      std::to_string(gaps.records_after_torn) +
                      " unacknowledged records after the gap were dropped";
  }
  uint64_t latest = skip_any.latest_seq;
  if (gaps.damaged_after != 0 || gaps.torn) {
    // What the open below replays (point in time, the voids skipped).
    Probe pit;
    Status s =
        ProbeStore(path, base, cfs, *voids, rocksdb::WALRecoveryMode::kPointInTimeRecovery, &pit);
    if (!s.ok()) return s;
    latest = pit.latest_seq;
  }
  if (guard != nullptr && latest < guard->acked_seq) {
    losses.push_back("the WAL replays up to sequence " + std::to_string(latest) +
                     ", but writes through sequence " + std::to_string(guard->acked_seq) +
                     " were acknowledged: " + std::to_string(guard->acked_seq - latest) +
                     " sequence numbers of acknowledged writes would be lost");
    outcome->accepted_loss = guard->acked_seq - latest;
  }
  if (losses.empty()) return Status::Ok();
  std::string what;
  for (const std::string& l : losses) what += (what.empty() ? "" : "; and ") + l;
  if (!skip_any.damage.empty()) what += ". RocksDB's log says: " + skip_any.damage;
  if (!options.accept_wal_loss) {
    return Status::Corruption(
        "store " + path + ": its WAL is damaged: " + what +
        ". Nothing was changed. Restore the last backup (intentd restore), or start once with "
        "--accept-wal-loss to open it without the damaged part (its WAL files are copied to " +
        path + "/wal-damaged-<time>/ first)");
  }
  std::string kept;
  const int64_t now = (options.clock != nullptr ? options.clock : &SystemClock())->NowMs();
  if (std::string error = KeepDamagedWal(path, now, &kept); !error.empty()) {
    return Status::StorageError("store " + path + ": --accept-wal-loss: " + error +
                                " (nothing was changed)");
  }
  if (outcome->accepted_loss == 0) {
    outcome->accepted_loss = gaps.records_after_damage > 0 ? gaps.records_after_damage : 1;
  }
  outcome->notice = "ACCEPTED THE LOSS OF ACKNOWLEDGED WRITES (--accept-wal-loss): " + what +
                    ". The damaged WAL files were copied to " + kept;
  return Status::Ok();
}

}  // namespace

Status FromRocks(const rocksdb::Status& s, const std::string& context) {
  const std::string message = context + ": " + s.ToString();
  if (s.IsCorruption()) return Status::Corruption(message);
  if (s.IsNotSupported()) return Status::Incompatible(message);
  if (IsLockError(s)) return Status::Busy(message);
  return Status::StorageError(message);
}

Status RocksStore::Open(const RocksOptions& options, std::unique_ptr<RocksStore>* store) {
  return OpenRocksStore(options, nullptr, store);
}

Status OpenRocksStore(const RocksOptions& options, std::shared_ptr<FaultInjection> faults,
                      std::unique_ptr<RocksStore>* store) {
  // The group commit syncs the WAL files itself (wal_files.h says why).
  auto wal = std::make_unique<WalFiles>();
  std::shared_ptr<rocksdb::FileSystem> fs = rocksdb::FileSystem::Default();
  if (faults) fs = NewFaultInjectionFileSystem(std::move(fs), faults);
  // RocksDB writes the WAL in the store's directory (no wal_dir is set).
  std::unique_ptr<rocksdb::Env> env =
      rocksdb::NewCompositeEnv(wal->Track(std::move(fs), options.path));
  // Until the store exists its commit numbers are unknown: WAL files the
  // open creates are not counted (the hooks are set by RocksStoreImpl).
  auto errors = std::make_shared<StorageErrorListener>();
  DbHandles h;
  std::unique_ptr<WalGuard> guard;
  OpenOutcome outcome;
  OpenRequest request;
  request.create = true;
  Status s = OpenDb(options, env.get(), errors, request, &guard, &h, &outcome);
  if (!s.ok()) return s;
  // RocksDB's flush and compaction threads run at a low CPU priority (nice
  // 19; process-wide, these pools are the default Env's): they use the CPU
  // the request path leaves, and when they fall behind RocksDB's write stall
  // slows the writers down until they catch up. The flush of a hash skip-list
  // memtable sorts every entry of it, ~7% of the agent's CPU at 64
  // connections (perf record -g -p PID under intentd_loadgen), which on two
  // cores the io threads need: bench/RESULTS.md, "One clean fast path".
  env->LowerThreadPoolCPUPriority(rocksdb::Env::Priority::HIGH, rocksdb::CpuPriority::kLow);
  env->LowerThreadPoolCPUPriority(rocksdb::Env::Priority::LOW, rocksdb::CpuPriority::kLow);
  if (!wal->TracksAny()) {
    CloseDb(&h);
    return Status::StorageError("store " + options.path +
                                ": RocksDB's WAL file was not seen where it was expected, so "
                                "acknowledged writes could not be made durable; not opening");
  }
  // After the checks: a refused open deletes no leftover spare.
  wal->SetUpSpares(options.sync && options.wal_spares, options.min_free_bytes);
  if (!outcome.notice.empty() && options.log) {
    options.log(outcome.accepted_loss > 0, "store: " + outcome.notice);
  }
  *store =
      std::make_unique<RocksStoreImpl>(options, std::move(wal), std::move(env), std::move(faults),
                                       std::move(errors), std::move(guard), std::move(h), outcome);
  return Status::Ok();
}

Status OpenDb(const RocksOptions& options, rocksdb::Env* env,
              std::shared_ptr<StorageErrorListener> listener, const OpenRequest& request,
              std::unique_ptr<WalGuard>* guard, DbHandles* h, OpenOutcome* outcome) {
  *outcome = OpenOutcome();
  if (options.path.empty()) return Status::InvalidArgument("store path is empty");
  // (IntentLive needs an intent to outlive the instant it was written in.)
  if (options.retention_ms <= 0) return Status::InvalidArgument("retention_ms must be positive");
  auto action_reader = std::make_shared<ActionReader>();
  const CfOptionsFactory cfs(options.block_cache_bytes,
                             options.clock != nullptr ? options.clock : &SystemClock(),
                             options.hash_memtables, action_reader);
  rocksdb::DBOptions db_options = StoreDbOptions(env, options);
  const std::shared_ptr<rocksdb::FileSystem> fs = env->GetFileSystem();
  std::vector<std::string> cf_names = {rocksdb::kDefaultColumnFamilyName,
                                       kIntentsCf,
                                       kActionsCf,
                                       kLeasesCf,
                                       kMetaCf,
                                       kMessagesCf,
                                       kPolicyCf};
  std::vector<CommitRange> voids = request.voids;
  WalGuard::State guard_state;
  bool guard_found = false;
  bool unformatted = false;
  int format = kFormatVersion;
  const bool exists = env->FileExists(options.path + "/CURRENT").ok();
  if (exists) {
    // Busy first, while nothing was touched: RocksDB's own open rotates the
    // LOG file before it takes the lock.
    rocksdb::FileLock* lock = nullptr;
    rocksdb::Status rs = env->LockFile(options.path + "/LOCK", &lock);
    if (!rs.ok()) {
      return Status::Busy("store " + options.path + " is in use by another process (" +
                          rs.ToString() + ")");
    }
    Status s = WalGuard::Load(fs.get(), options.path, &guard_state, &guard_found);
    if (!s.ok() && !options.accept_wal_loss) {
      s = Status::Corruption("store " + options.path + ": " + s.message() +
                             ": the writes it voids and the acknowledged ones it vouches for "
                             "are unknown. Nothing was changed; restore the last backup, or "
                             "start once with --accept-wal-loss to open the store without it");
    } else if (!s.ok()) {
      outcome->notice = "ignored a damaged " + std::string(kWalGuardFile) +
                        " (--accept-wal-loss): " + s.message();
      s = Status::Ok();
    }
    std::vector<CommitRange> probe_voids = voids;
    if (guard_found)
      probe_voids.insert(probe_voids.end(), guard_state.voids.begin(), guard_state.voids.end());
    // A replay that skips damaged records: what follows a gap shows.
    Probe probe;
    if (s.ok()) {
      s = ProbeStore(options.path, db_options, cfs, probe_voids,
                     rocksdb::WALRecoveryMode::kSkipAnyCorruptedRecords, &probe);
    }
    if (s.ok() && guard_found && guard_state.identity != probe.identity) {
      // A guard of another store (a directory copied over this one): what
      // it says is not about this WAL.
      outcome->notice = "ignored " + std::string(kWalGuardFile) + " of another store (identity " +
                        guard_state.identity + ", this one is " + probe.identity + ")";
      guard_found = false;
      probe_voids = voids;
      s = ProbeStore(options.path, db_options, cfs, probe_voids,
                     rocksdb::WALRecoveryMode::kSkipAnyCorruptedRecords, &probe);
    }
    if (s.ok()) {
      voids = probe_voids;
      unformatted = probe.unformatted;
      format = probe.format;
      outcome->next_commit = std::max<uint64_t>({outcome->next_commit, probe.highest_commit + 1,
                                                 guard_found ? guard_state.next_commit : 1});
      s = JudgeWal(options.path, db_options, cfs, options, guard_found ? &guard_state : nullptr,
                   probe, &voids, outcome);
    }
    if (s.ok()) {
      rs = rocksdb::DB::ListColumnFamilies(db_options, options.path, &cf_names);
      if (!rs.ok()) s = Unreadable(rs, options.path);
    }
    env->UnlockFile(lock);
    if (!s.ok()) return s;
    // Format 3 and older have no messages column family: created here, in
    // the open (RocksDB writes the new family to its MANIFEST atomically).
    if (std::find(cf_names.begin(), cf_names.end(), kMessagesCf) == cf_names.end()) {
      cf_names.push_back(kMessagesCf);
      db_options.create_missing_column_families = true;
    }
    // Nor has a format 5 or older store the policy's family.
    if (std::find(cf_names.begin(), cf_names.end(), kPolicyCf) == cf_names.end()) {
      cf_names.push_back(kPolicyCf);
      db_options.create_missing_column_families = true;
    }
  } else if (!request.create) {
    return Status::StorageError("no store at " + options.path +
                                " any more (no CURRENT file): not creating a new one in its place");
  } else {
    Status s = CheckFreshDirectory(options.path);
    if (!s.ok()) return s;
    db_options.create_if_missing = true;
    db_options.create_missing_column_families = true;
    db_options.error_if_exists = true;
  }
  for (const CommitRange& v : voids) {
    outcome->next_commit = std::max(outcome->next_commit, v.through + 1);
  }
  db_options.listeners.push_back(std::move(listener));
  db_options.info_log = NewStoreLogger(options.path);
  auto replay = std::make_shared<ReplayFilter>(voids);
  db_options.wal_filter = replay.get();

  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (const auto& n : cf_names) descriptors.emplace_back(n, cfs.For(n));
  DbHandles opened;
  rocksdb::Status rs =
      rocksdb::DB::Open(db_options, options.path, descriptors, &opened.all, &opened.db);
  if (!rs.ok()) return FromRocks(rs, "open store " + options.path);
  opened.replay = std::move(replay);
  Status s = AssignHandles(options.path, &opened);
  if (!s.ok()) return s;
  action_reader->Attach(opened.db, opened.actions);
  opened.action_reader = std::move(action_reader);
  outcome->next_commit = std::max(outcome->next_commit, opened.replay->highest() + 1);
  if (!exists || unformatted) {
    rocksdb::WriteOptions sync;
    sync.sync = true;
    rs = opened.db->Put(sync, opened.meta, kFormatVersionKey, std::to_string(kFormatVersion));
    if (!rs.ok()) {
      CloseDb(&opened);
      return FromRocks(rs, "write format version of new store " + options.path);
    }
  } else if (format < kFormatVersion) {
    // Format 1 kept a second, per-tenant copy of the lease index; format 2
    // drops it (codec.h). Format 3 reads format 2's records as they are
    // (kFormatVersion), format 4 only adds the messages column family,
    // created by the open above, format 5 reads format 4's records as they
    // are, and format 6 adds the policy family (also created above). One
    // synced batch, so a crash leaves either format.
    rocksdb::WriteBatch upgrade;
    rocksdb::WriteOptions sync;
    sync.sync = true;
    if (format == 1) {
      rs = upgrade.DeleteRange(opened.leases, codec::kLeaseTenantOrderBegin,
                               codec::kLeaseTenantOrderEnd);
    }
    if (rs.ok() && format < 4) {
      // Every intent written before keyrings was keyed with the one secret,
      // id "0".
      std::unique_ptr<rocksdb::Iterator> it(
          opened.db->NewIterator(TotalOrderRead(), opened.intents));
      it->SeekToFirst();
      if (it->Valid()) rs = upgrade.Put(opened.meta, std::string(kKeyIdPrefix) + "0", "");
      if (rs.ok()) rs = it->status();
    }
    if (rs.ok()) rs = upgrade.Put(opened.meta, kFormatVersionKey, std::to_string(kFormatVersion));
    if (rs.ok()) rs = opened.db->Write(sync, &upgrade);
    if (!rs.ok()) {
      CloseDb(&opened);
      return FromRocks(rs, "upgrade store " + options.path + " from format " +
                               std::to_string(format) + " (nothing was lost)");
    }
  }
  if (!opened.db->GetDbIdentity(outcome->identity).ok()) outcome->identity.clear();
  // The open replayed the WAL (the voids skipped) and flushed what it
  // replayed: the voids are done with, and everything in the DB is durable.
  WalGuard::State state;
  state.identity = outcome->identity;
  state.acked_seq = opened.db->GetLatestSequenceNumber();
  state.next_commit = outcome->next_commit;
  if (*guard == nullptr) {
    s = WalGuard::Open(fs, options.path, state, guard);
  } else {
    s = (*guard)->SetVoids({}, state.next_commit);
    (*guard)->Acked(state.acked_seq);
  }
  if (!s.ok()) {
    CloseDb(&opened);
    return Status::StorageError("store " + options.path + ": cannot write its " +
                                std::string(kWalGuardFile) + ": " + s.message());
  }
  *h = std::move(opened);
  return Status::Ok();
}

Status OpenDbReadOnly(const RocksOptions& options, rocksdb::Env* env,
                      const std::vector<CommitRange>& voids, DbHandles* h) {
  const CfOptionsFactory cfs(options.block_cache_bytes,
                             options.clock != nullptr ? options.clock : &SystemClock(),
                             options.hash_memtables);
  std::vector<CommitRange> all = voids;
  WalGuard::State guard;
  bool found = false;
  if (WalGuard::Load(env->GetFileSystem().get(), options.path, &guard, &found).ok() && found) {
    all.insert(all.end(), guard.voids.begin(), guard.voids.end());
  }
  return OpenReadOnly(options.path, StoreDbOptions(env, options), cfs, all,
                      rocksdb::WALRecoveryMode::kPointInTimeRecovery, nullptr, h);
}

void CloseDb(DbHandles* h) {
  if (h->db == nullptr) return;
  // No compaction reads the DB once it closes (the filter then keeps intents).
  if (h->action_reader) h->action_reader->Detach();
  for (auto* handle : h->all) h->db->DestroyColumnFamilyHandle(handle);
  h->db->Close();  // a store closed after a storage error may report it again
  delete h->db;
  *h = DbHandles();
}

}  // namespace intentd::store
