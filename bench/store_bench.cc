// bench_store: figures for the RocksDB store (plain main, prints results).
//
//   bench_store [--dir=PATH] [--threads=1,8,64] [--seconds=5]
//               [--actions=10000000] [--reads=200000] [--size-actions=200000]
//               [--skip=sync,throughput,nosync,read,size] [--skip-lists]
//               [--no-wal-spares]
//
// --skip-lists opens every store with skip-list memtables and concurrent
// inserts (RocksOptions::hash_memtables false; the default is hash memtables).
// --no-wal-spares: synced stores grow their WAL files (RocksOptions::wal_spares
// false; the default is true, as in the agent).
//
// sync        fdatasync/s of the disk under --dir (4 KiB in-place rewrite)
// throughput  begin+complete pairs/s on fresh intents, per thread count; synced
//             as the agent runs the store: deferred sync, each operation then
//             waits for its durability ticket (the group commit's one path)
// read        GetAction latency over --actions completed actions bulk-loaded
//             (unsynced batches, then compacted)
// size        on-disk bytes per completed action (200-byte response), compacted
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <future>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "store/rocks/rocks_store.h"

namespace {

using intentd::store::Action;
using intentd::store::BeginResult;
using intentd::store::Decision;
using intentd::store::Intent;
using intentd::store::IntentCandidate;
using intentd::store::IntentRecord;
using intentd::store::RocksOptions;
using intentd::store::RocksStore;
using intentd::store::Status;
using Clock = std::chrono::steady_clock;

struct Flags {
  std::string dir;
  std::vector<int> threads = {1, 8, 64};
  double seconds = 5;
  uint64_t actions = 10'000'000;
  uint64_t reads = 200'000;
  uint64_t size_actions = 200'000;
  std::string skip;
  bool skip_lists = false;
  bool wal_spares = true;
};

bool Parse(int argc, char** argv, Flags* f) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* name) -> const char* {
      const size_t n = std::strlen(name);
      return a.compare(0, n, name) == 0 ? a.c_str() + n : nullptr;
    };
    if (const char* v = value("--dir=")) {
      f->dir = v;
    } else if (const char* v = value("--threads=")) {
      f->threads.clear();
      for (const char* p = v; *p != '\0';) {
        f->threads.push_back(std::atoi(p));
        p = std::strchr(p, ',');
        if (p == nullptr) break;
        ++p;
      }
    } else if (const char* v = value("--seconds=")) {
      f->seconds = std::atof(v);
    } else if (const char* v = value("--actions=")) {
      f->actions = std::strtoull(v, nullptr, 10);
    } else if (const char* v = value("--reads=")) {
      f->reads = std::strtoull(v, nullptr, 10);
    } else if (const char* v = value("--size-actions=")) {
      f->size_actions = std::strtoull(v, nullptr, 10);
    } else if (const char* v = value("--skip=")) {
      f->skip = v;
    } else if (a == "--skip-lists") {
      f->skip_lists = true;
    } else if (a == "--no-wal-spares") {
      f->wal_spares = false;
    } else {
      std::fprintf(stderr, "unknown argument %s (see the header of store_bench.cc)\n", argv[i]);
      return false;
    }
  }
  return true;
}

bool Skipped(const Flags& f, const std::string& part) {
  return ("," + f.skip + ",").find("," + part + ",") != std::string::npos;
}

void Die(const char* what, const Status& s) {
  std::fprintf(stderr, "%s: %s\n", what, s.message().c_str());
  std::exit(1);
}

uint64_t Mix(uint64_t x) {  // splitmix64
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// 64 hex digits, as random as an HMAC-SHA256 key.
std::string KeyOf(uint64_t n) {
  char buf[65];
  uint64_t x = Mix(n);
  for (int w = 0; w < 4; ++w) {
    std::snprintf(buf + 16 * w, 17, "%016" PRIx64, x);
    x = Mix(x + w);
  }
  return std::string(buf, 64);
}

std::string PayloadOf(uint64_t n) {
  return "{\"chave_pix_destino\":\"+5511987654321\",\"cliente_id\":\"01J9ZQ3K8V7M2N4P6R8T0W" +
         std::to_string(n % 10000) + "\",\"referencia_intencao\":\"FAT-2026-" + std::to_string(n) +
         "\",\"valor\":\"" + std::to_string(1000 + n % 90000) + "\"}";
}

// A 200-byte JSON response (a PSP's charge record: ids, amount, a QR link).
std::string ResponseOf(uint64_t n) {
  std::string r = "{\"txid\":\"" + KeyOf(n).substr(0, 35) + "\",\"status\":\"ATIVA\",\"valor\":\"" +
                  std::to_string(1000 + n % 90000) + "\",\"location\":\"pix.example.com/qr/v2/";
  const std::string tail = "\"}";
  std::string fill;
  for (uint64_t i = 1; fill.size() < 200; ++i) fill += KeyOf(n * 7919 + i);
  r += fill.substr(0, 200 - r.size() - tail.size());
  return r + tail;
}

IntentCandidate NewIntent(const std::string& ref, uint64_t n) {
  IntentCandidate r;
  r.tenant_id = "acme";
  r.intent_ref = ref;
  r.action_type = "pix.cobranca";
  Intent c;
  c.payload = PayloadOf(n);
  c.key = KeyOf(n);
  c.rules_version = 2;
  r.candidate = std::move(c);
  return r;
}

std::unique_ptr<RocksStore> OpenFresh(const Flags& f, const std::string& path, bool sync) {
  std::filesystem::remove_all(path);
  RocksOptions o;
  o.path = path;
  o.sync = sync;
  o.defer_sync = sync;  // as the agent: tickets, not blocking commits
  o.hash_memtables = !f.skip_lists;
  o.wal_spares = f.wal_spares;
  std::unique_ptr<RocksStore> store;
  Status s = RocksStore::Open(o, &store);
  if (!s.ok()) Die("open", s);
  return store;
}

// Waits until what the caller's last operation wrote or read is durable, as
// the agent holds a reply until its ticket is.
Status AwaitTicket(RocksStore* store) {
  const uint64_t ticket = store->DurabilityTicket();
  if (ticket == 0) return Status::Ok();
  std::promise<Status> durable;
  store->WhenDurable(ticket, [&durable](const Status& s) { durable.set_value(s); });
  return durable.get_future().get();
}

double Percentile(std::vector<double>* v, double p) {
  if (v->empty()) return 0;
  const size_t i = std::min(v->size() - 1, static_cast<size_t>(p * v->size()));
  std::nth_element(v->begin(), v->begin() + i, v->end());
  return (*v)[i];
}

// "Group commit: 12 writes, 3 WAL syncs, 4.00 writes per sync"
std::string WalLine(const std::string& stats) {
  const size_t at = stats.find("Group commit:");
  if (at == std::string::npos) return "(no WAL stats)";
  std::string line = stats.substr(at, stats.find('\n', at) - at);
  // "WAL files: 3 made from spares, 1 created empty" (with wal_spares)
  if (const size_t wal = stats.find("WAL files:"); wal != std::string::npos) {
    line += "; " + stats.substr(wal, stats.find('\n', wal) - wal);
  }
  return line;
}

void DiskSyncRate(const std::string& dir) {
  const std::string path = dir + "/sync-probe";
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
  std::vector<char> block(4096, 'x');
  if (fd < 0 || pwrite(fd, block.data(), block.size(), 0) != 4096 || fsync(fd) != 0) {
    std::perror("sync probe");
    return;
  }
  int n = 0;
  const auto end = Clock::now() + std::chrono::seconds(2);
  while (Clock::now() < end) {
    if (pwrite(fd, block.data(), block.size(), 0) != 4096 || fdatasync(fd) != 0) break;
    ++n;
  }
  close(fd);
  unlink(path.c_str());
  std::printf("disk: %.0f fdatasync/s (4 KiB in-place rewrite, one thread)\n", n / 2.0);
}

// One run: `threads` workers doing begin+complete pairs on fresh intents.
void ThroughputRun(const Flags& f, const std::string& dir, int threads, bool sync) {
  {
    auto store = OpenFresh(f, dir + "/throughput", sync);
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> pairs{0}, errors{0};
    std::vector<std::vector<double>> latencies(threads);
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        const std::string response = ResponseOf(t);
        for (uint64_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
          const uint64_t n = (static_cast<uint64_t>(t) << 40) | i;
          const auto start = Clock::now();
          BeginResult r;
          Status s = store->Begin(NewIntent("FAT-" + std::to_string(n), n), 300'000, &r);
          if (s.ok()) s = AwaitTicket(store.get());
          Action a;
          if (s.ok() && r.decision == Decision::kExecute) {
            s = store->Complete("acme", r.intent.key, r.action.lease_token, response, &a);
            if (s.ok()) s = AwaitTicket(store.get());
          }
          if (!s.ok() || r.decision != Decision::kExecute) {
            errors.fetch_add(1);
            continue;
          }
          latencies[t].push_back(
              std::chrono::duration<double, std::micro>(Clock::now() - start).count());
          pairs.fetch_add(1, std::memory_order_relaxed);
        }
      });
    }
    const auto start = Clock::now();
    std::this_thread::sleep_for(std::chrono::duration<double>(f.seconds));
    stop = true;
    for (auto& w : workers) w.join();
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    std::vector<double> all;
    for (auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
    std::printf(
        "throughput: %2d threads: %8.0f begin+complete pairs/s (sync=%s), pair latency "
        "p50 %.0f us p99 %.0f us, errors %" PRIu64 "\n             %s\n",
        threads, pairs / elapsed, sync ? "true" : "false", Percentile(&all, 0.5),
        Percentile(&all, 0.99), errors.load(), WalLine(store->EngineStats()).c_str());
    std::fflush(stdout);
  }
  std::filesystem::remove_all(dir + "/throughput");
}

void Throughput(const Flags& f, const std::string& dir) {
  if (!Skipped(f, "throughput")) {
    for (int threads : f.threads) ThroughputRun(f, dir, threads, /*sync=*/true);
  }
  // The CPU ceiling: the same work with the WAL written but not synced.
  if (!f.threads.empty() && !Skipped(f, "nosync")) {
    ThroughputRun(f, dir, f.threads.back(), /*sync=*/false);
  }
}

void PointReads(const Flags& f, const std::string& dir) {
  auto store = OpenFresh(f, dir + "/reads", /*sync=*/false);
  const auto load_start = Clock::now();
  const uint64_t kBatch = 20'000;
  std::vector<IntentRecord> batch;
  for (uint64_t n = 0; n < f.actions; ++n) {
    IntentRecord rec;
    rec.intent.tenant_id = "acme";
    rec.intent.intent_ref = "FAT-" + std::to_string(n);
    rec.intent.action_type = "pix.cobranca";
    rec.intent.payload = PayloadOf(n);
    rec.intent.key = KeyOf(n);
    rec.intent.rules_version = 2;
    Action a;
    a.action_type = "pix.cobranca";
    a.intent_ref = rec.intent.intent_ref;
    a.status = intentd::store::ActionStatus::kCompleted;
    a.attempt = a.lease_token = 1;
    a.response = ResponseOf(n);
    rec.action = std::move(a);
    batch.push_back(std::move(rec));
    if (batch.size() == kBatch || n + 1 == f.actions) {
      Status s = store->BulkLoad(batch);
      if (!s.ok()) Die("bulk load", s);
      batch.clear();
    }
  }
  const double load_s = std::chrono::duration<double>(Clock::now() - load_start).count();
  const auto compact_start = Clock::now();
  Status s = store->CompactAll();
  if (!s.ok()) Die("compact", s);
  const double compact_s = std::chrono::duration<double>(Clock::now() - compact_start).count();
  std::printf("read: loaded %" PRIu64
              " completed actions (+ intents) in %.0f s, compacted in %.0f s, %.2f GB on disk\n",
              f.actions, load_s, compact_s, store->ApproximateSizeBytes().value_or(0) / 1e9);

  std::mt19937_64 rng(42);
  Action a;
  for (uint64_t i = 0; i < f.reads / 4; ++i) {  // warm the index, filters and page cache
    store->GetAction("acme", KeyOf(rng() % f.actions), &a);
  }
  std::vector<double> lat;
  lat.reserve(f.reads);
  uint64_t misses = 0;
  for (uint64_t i = 0; i < f.reads; ++i) {
    const std::string key = KeyOf(rng() % f.actions);
    const auto start = Clock::now();
    s = store->GetAction("acme", key, &a);
    lat.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
    misses += !s.ok();
  }
  std::printf("read: GetAction over %" PRIu64
              " actions: p50 %.1f us, p99 %.1f us, p99.9 %.1f us (%" PRIu64 " reads, %" PRIu64
              " misses)\n",
              f.actions, Percentile(&lat, 0.5), Percentile(&lat, 0.99), Percentile(&lat, 0.999),
              f.reads, misses);
  store.reset();
  std::filesystem::remove_all(dir + "/reads");
}

void BytesPerAction(const Flags& f, const std::string& dir) {
  auto store = OpenFresh(f, dir + "/size", /*sync=*/false);
  for (uint64_t n = 0; n < f.size_actions; ++n) {
    BeginResult r;
    Status s = store->Begin(NewIntent("FAT-2026-" + std::to_string(n), n), 300'000, &r);
    Action a;
    if (s.ok()) s = store->Complete("acme", r.intent.key, r.action.lease_token, ResponseOf(n), &a);
    if (!s.ok()) Die("size workload", s);
  }
  Status s = store->CompactAll();
  if (!s.ok()) Die("compact", s);
  const uint64_t bytes = store->ApproximateSizeBytes().value_or(0);
  std::printf("size: %" PRIu64
              " completed actions (intent + action, %zu-byte response, ~%zu-byte payload): %.1f "
              "bytes/action on disk after compaction\n",
              f.size_actions, ResponseOf(1).size(), PayloadOf(f.size_actions / 2).size(),
              static_cast<double>(bytes) / f.size_actions);
  store.reset();
  std::filesystem::remove_all(dir + "/size");
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  if (!Parse(argc, argv, &flags)) return 2;
  bool own_dir = false;
  if (flags.dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern =
        std::string(tmp != nullptr && *tmp ? tmp : "/tmp") + "/bench_store-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) {
      std::perror("mkdtemp");
      return 1;
    }
    flags.dir = pattern;
    own_dir = true;
  }
  std::filesystem::create_directories(flags.dir);
  std::printf("bench_store: dir %s, %u hardware threads%s\n", flags.dir.c_str(),
              std::thread::hardware_concurrency(), flags.skip_lists ? ", skip-list memtables" : "");
  if (!Skipped(flags, "sync")) DiskSyncRate(flags.dir);
  Throughput(flags, flags.dir);
  if (!Skipped(flags, "size")) BytesPerAction(flags, flags.dir);
  if (!Skipped(flags, "read")) PointReads(flags, flags.dir);
  if (own_dir) std::filesystem::remove_all(flags.dir);
  return 0;
}
