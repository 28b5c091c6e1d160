// bench_ops: figures for operating intentd (plain main, prints results).
//
//   bench_ops [--dir=PATH] [--records=100000] [--only=begin]
//
// begin       begin through Dispatcher::HandleLine on an unsynced store, one
//             thread: new intents, then their redeliveries (the same
//             extraction), then diverged ones; CPU and wall time per request
// metrics     the metrics op (Dispatcher::HandleLine) over a store of
//             --records completed actions, with 0..10000 uncertain ones
//             (the uncertain gauges count at most 1000)
// lease gauge one Granted + Ended pair (the begin/complete path), 1 and 8 threads
// backup      RocksStore::Checkpoint of that store
// export      ExportStore + ExportRecordLine, records/s
// import      StoreImporter::Add into an empty store, then again (all unchanged)
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "cli/export_format.h"
#include "common/config.h"
#include "protocol/dispatcher.h"
#include "protocol/metrics.h"
#include "store/export.h"
#include "store/rocks/rocks_store.h"

namespace {

namespace fs = std::filesystem;
using namespace intentd;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

store::IntentRecord Record(const std::string& tenant, uint64_t i, store::ActionStatus status,
                           int64_t now) {
  store::IntentRecord r;
  r.intent.tenant_id = tenant;
  r.intent.intent_ref = "FAT-" + std::to_string(i);
  r.intent.action_type = "pix.cobranca";
  r.intent.key = "k" + std::to_string(i) + std::string(60, 'a');
  r.intent.payload =
      R"({"chave_pix_destino":"11144477735","cliente_id":"01J9ZQ3K8V7M2N4P6R8T0W2Y4A","referencia_intencao":"FAT-1","valor":"18000"})";
  r.intent.rules_version = 2;
  r.intent.created_at_ms = r.intent.updated_at_ms = now - 5000;
  store::Action a;
  a.action_type = r.intent.action_type;
  a.intent_ref = r.intent.intent_ref;
  a.status = status;
  a.attempt = a.lease_token = 1;
  a.lease_until_ms = now - 1000;  // started: expired, hence uncertain
  if (status == store::ActionStatus::kCompleted) a.response = std::string(200, 'r');
  a.created_at_ms = a.updated_at_ms = now - 5000;
  r.action = a;
  return r;
}

void Load(store::RocksStore* s, uint64_t first, uint64_t n, store::ActionStatus status,
          const std::string& tenant, int64_t now) {
  std::vector<store::IntentRecord> batch;
  for (uint64_t i = first; i < first + n; ++i) {
    batch.push_back(Record(tenant, i, status, now));
    if (batch.size() == 10000) {
      if (!s->BulkLoad(batch).ok()) std::abort();
      batch.clear();
    }
  }
  if (!batch.empty() && !s->BulkLoad(batch).ok()) std::abort();
}

void BenchMetrics(store::RocksStore* s, int64_t now, uint64_t records) {
  agent::Config config;
  normalizers::KeyDeriver deriver(std::string(32, 'k'));
  agent::DispatcherOptions options;
  agent::Dispatcher dispatcher(config, deriver, s, options);
  transport::PeerCredentials peer{1, 0, 0, {}};
  uint64_t loaded = 0;
  std::printf("metrics op over %llu completed actions:\n",
              static_cast<unsigned long long>(records));
  for (uint64_t uncertain : {0, 100, 1000, 10000}) {
    Load(s, 10'000'000 + loaded, uncertain - loaded, store::ActionStatus::kStarted, "acme", now);
    loaded = uncertain;
    std::vector<double> us;
    size_t bytes = 0;
    for (int i = 0; i < 200; ++i) {
      auto t0 = Clock::now();
      bytes = dispatcher.HandleLine(peer, R"({"op":"metrics"})").size();
      us.push_back(Seconds(t0) * 1e6);
    }
    std::sort(us.begin(), us.end());
    std::printf("  %5llu uncertain: median %7.0f us, p99 %7.0f us, response %zu bytes\n",
                static_cast<unsigned long long>(uncertain), us[us.size() / 2],
                us[us.size() * 99 / 100], bytes);
  }
}

void BenchLeaseGauge() {
  for (int threads : {1, 8}) {
    agent::LeaseGauge gauge;
    const int per_thread = 400000 / threads;
    auto t0 = Clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        const std::string tenant = "tenant-" + std::to_string(t);
        for (int i = 0; i < per_thread; ++i) {
          const std::string key = std::to_string(i) + std::string(56, 'k');
          gauge.Granted(tenant, key, 2000, 1000);
          gauge.Ended(tenant, key);
        }
      });
    }
    for (auto& th : pool) th.join();
    const double s = Seconds(t0);
    std::printf("lease gauge: %d thread%s, %.0f ns per Granted+Ended pair (wall / pairs)\n",
                threads, threads == 1 ? "" : "s", s * 1e9 / (per_thread * threads));
  }
}

// The begin path alone: what a redelivery costs against a new intent.
void BenchBegin(const std::string& dir) {
  store::RocksOptions o;
  o.path = dir + "/begin";
  o.sync = false;
  std::unique_ptr<store::RocksStore> s;
  if (!store::RocksStore::Open(o, &s).ok()) std::abort();
  agent::Config config;
  normalizers::KeyDeriver deriver(std::string(32, 'k'));
  agent::Dispatcher dispatcher(config, deriver, s.get(), agent::DispatcherOptions());
  transport::PeerCredentials peer{1, 0, 0, {}};
  constexpr int kIntents = 20000;
  auto line = [](int i, const char* valor) {
    return std::string(R"({"op":"begin","tenant_id":"acme","intent_ref":"FAT-)") +
           std::to_string(i) +
           R"(","action_type":"pix.cobranca","lease_ms":60000,"payload":{"cliente_id":"01J9ZQ3K8V7M2N4P6R8T0W2Y4A","valor":")" +
           valor + R"(","chave_pix_destino":"111.444.777-35"}})";
  };
  std::printf("begin through the dispatcher, %d intents, unsynced store, one thread:\n", kIntents);
  struct Round {
    const char* name;
    const char* valor;
    const char* decision;
  };
  for (const Round& r :
       {Round{"new", "180.00", "\"execute\""}, Round{"redelivered", "180.00", "\"in_flight\""},
        Round{"redelivered, diverged", "181.00", "\"in_flight\""}}) {
    std::vector<std::string> lines;
    for (int i = 0; i < kIntents; ++i) lines.push_back(line(i, r.valor));
    const std::clock_t cpu0 = std::clock();
    const auto t0 = Clock::now();
    for (const std::string& l : lines) {
      const std::string answer = dispatcher.HandleLine(peer, l);
      if (answer.find(r.decision) == std::string::npos) {
        std::fprintf(stderr, "unexpected answer: %s\n", answer.c_str());
        std::abort();
      }
    }
    const double wall = Seconds(t0);
    const double cpu = static_cast<double>(std::clock() - cpu0) / CLOCKS_PER_SEC;
    std::printf("  %-22s %6.1f us CPU, %6.1f us wall per request\n", r.name, cpu * 1e6 / kIntents,
                wall * 1e6 / kIntents);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir =
      (fs::temp_directory_path() / ("bench_ops." + std::to_string(getpid()))).string();
  uint64_t records = 100000;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--dir=", 0) == 0)
      dir = a.substr(6);
    else if (a.rfind("--records=", 0) == 0)
      records = std::stoull(a.substr(10));
    else if (a == "--only=begin")
      only = "begin";
    else {
      std::fprintf(stderr, "usage: bench_ops [--dir=PATH] [--records=N] [--only=begin]\n");
      return 2;
    }
  }
  fs::remove_all(dir);
  BenchBegin(dir);
  if (only == "begin") {
    fs::remove_all(dir);
    return 0;
  }
  const int64_t now = store::SystemClock().NowMs();
  const std::string src = dir + "/src";
  {
    store::RocksOptions o;
    o.path = src;
    o.sync = false;
    std::unique_ptr<store::RocksStore> s;
    if (!store::RocksStore::Open(o, &s).ok()) return 1;
    Load(s.get(), 0, records, store::ActionStatus::kCompleted, "acme", now);
    if (!s->CompactAll().ok()) return 1;
    BenchMetrics(s.get(), now, records);
    auto t0 = Clock::now();
    if (!s->Checkpoint(dir + "/backup").ok()) return 1;
    std::printf("backup (checkpoint) of %.1f MB: %.0f ms\n",
                s->ApproximateSizeBytes().value_or(0) / 1e6, Seconds(t0) * 1e3);
  }
  BenchLeaseGauge();

  std::vector<store::ExportRecord> all;
  store::ExportCounts counts;
  size_t bytes = 0;
  auto t0 = Clock::now();
  store::Status st = store::ExportStore(
      {src, nullptr},
      [&](const store::ExportRecord& r) {
        bytes += cli::ExportRecordLine(r).size() + 1;
        all.push_back(r);
        return store::Status::Ok();
      },
      &counts);
  if (!st.ok()) return 1;
  double s = Seconds(t0);
  std::printf("export: %zu records in %.2f s (%.0f records/s, %.0f bytes/record)\n", all.size(), s,
              all.size() / s, static_cast<double>(bytes) / all.size());
  for (int round = 0; round < 2; ++round) {
    std::unique_ptr<store::StoreImporter> importer;
    if (!store::StoreImporter::Open({dir + "/imported", nullptr}, &importer).ok()) return 1;
    t0 = Clock::now();
    store::StoreImporter::Outcome outcome;
    for (const auto& r : all) {
      if (!importer->Add(r, &outcome).ok()) return 1;
    }
    if (!importer->Finish().ok()) return 1;
    s = Seconds(t0);
    std::printf("import %s: %.2f s (%.0f records/s)\n",
                round == 0 ? "into an empty store" : "again (all unchanged)", s, all.size() / s);
  }
  fs::remove_all(dir);
  return 0;
}
