// Backup (online checkpoint through the agent), restore, export and import:
// the real binary for the commands, the store API for building records that
// no client could send (tenant ids that are not UTF-8).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli/export_format.h"
#include "common/config.h"
#include "protocol/dispatcher.h"
#include "store/decision.h"
#include "store/rocks/rocks_store.h"
#include "tests/agent/agent_util.h"
#include "tests/store/forwarding_store.h"

namespace intentd::testing {
namespace {

namespace fs = std::filesystem;

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  for (size_t start = 0; start < text.size();) {
    size_t nl = text.find('\n', start);
    if (nl == std::string::npos) nl = text.size();
    lines.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return lines;
}

// The export without its header line (which carries the time of export).
std::string Records(const std::string& export_text) {
  return export_text.substr(export_text.find('\n') + 1);
}

json BeginRequest(const std::string& ref) {
  json p = PixPayload();
  p.erase("referencia_intencao");
  return {{"op", "begin"},
          {"tenant_id", "acme"},
          {"intent_ref", ref},
          {"action_type", "pix.cobranca"},
          {"payload", p}};
}

TEST(Backup, UnderLoadRestoresAndTheRestoredAgentReplaysTheSameResponses) {
  TempDir dir;
  fs::create_directories(dir.path() + "/live");
  Agent live(dir.path() + "/live");
  ASSERT_TRUE(live.started()) << live.Log();

  struct Done {
    std::string key;
    json response;
  };
  std::mutex mu;
  std::map<std::string, Done> completed;  // ref -> what the agent acknowledged
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  std::vector<std::thread> writers;
  for (int t = 0; t < 4; ++t) {
    writers.emplace_back([&, t] {
      Client c(live.socket_path());
      for (int i = 0; !stop.load(); ++i) {
        const std::string ref = "W" + std::to_string(t) + "-" + std::to_string(i);
        json b = c.Call(BeginRequest(ref));
        if (b.value("decision", "") != "execute") {
          ++failures;
          return;
        }
        json response = {{"charge", ref}, {"n", i}};
        json done = c.Call({{"op", "complete"},
                            {"tenant_id", "acme"},
                            {"key", b["key"]},
                            {"lease_token", b["lease_token"]},
                            {"response", response}});
        if (done.value("status", "") != "completed") {
          ++failures;
          return;
        }
        std::lock_guard<std::mutex> lock(mu);
        completed[ref] = {b["key"], response};
      }
    });
  }
  auto count = [&] {
    std::lock_guard<std::mutex> lock(mu);
    return completed.size();
  };
  while (count() < 40 && failures.load() == 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::map<std::string, Done> before;
  {
    std::lock_guard<std::mutex> lock(mu);
    before = completed;
  }
  const std::string backup = dir.path() + "/backups/b1";
  fs::create_directories(dir.path() + "/backups");
  std::string out, err;
  const int backup_status =
      RunIntentd({"backup", "--socket", live.socket_path(), backup}, &out, &err);
  if (backup_status != 0) {
    stop = true;  // joined first: an ASSERT returning with them running would terminate
    for (auto& w : writers) w.join();
  }
  ASSERT_EQ(backup_status, 0) << err;
  EXPECT_NE(out.find("backup written to " + backup), std::string::npos) << out;
  EXPECT_EQ(fs::status(backup).permissions() & fs::perms::all, fs::perms::owner_all);
  const size_t at_backup = count();
  while (count() < at_backup + 20 && failures.load() == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  stop = true;
  for (auto& w : writers) w.join();
  ASSERT_EQ(failures.load(), 0);
  // A second backup into the same place is refused; the first is intact.
  EXPECT_EQ(RunIntentd({"backup", "--socket", live.socket_path(), backup}, &out, &err), 1);
  EXPECT_NE(err.find("already exists"), std::string::npos) << err;

  ASSERT_EQ(
      RunIntentd({"restore", backup, "--data-dir", dir.path() + "/restored/data"}, &out, &err), 0)
      << err;
  EXPECT_NE(out.find("verified"), std::string::npos) << out;
  Agent restored(dir.path() + "/restored");
  ASSERT_TRUE(restored.started()) << restored.Log();
  Client c(restored.socket_path());
  for (const auto& [ref, done] : before) {
    json r = c.Call(BeginRequest(ref));
    ASSERT_EQ(r["decision"], "replay") << ref << " " << r.dump();
    EXPECT_EQ(r["key"], done.key);
    EXPECT_EQ(r["response"], done.response) << ref;
  }
  // What was written while the checkpoint was taken is either in it whole or
  // absent: never a different response.
  size_t replayed_after = 0;
  for (const auto& [ref, done] : completed) {
    if (before.count(ref)) continue;
    json r = c.Call(BeginRequest(ref));
    const std::string decision = r.value("decision", "");
    ASSERT_TRUE(decision == "replay" || decision == "in_flight" || decision == "execute")
        << r.dump();
    if (decision == "replay") {
      EXPECT_EQ(r["response"], done.response) << ref;
      ++replayed_after;
    }
  }
  std::printf(
      "[ backup ] %zu completed before the backup, %zu in all; %zu of the later ones in "
      "the checkpoint\n",
      before.size(), completed.size(), replayed_after);
}

class BackupOp : public ::testing::Test {
 protected:
  // with_checkpoint false: the agent's store is one without checkpoints
  // (ForwardingStore) in front of the RocksDB store.
  void Open(agent::Config config, bool with_checkpoint = true) {
    dispatcher_.reset();
    plain_.reset();
    store_.reset();
    config_ = std::move(config);
    store::RocksOptions options;
    options.path = dir_.path() + "/data";
    options.sync = false;
    ASSERT_TRUE(store::RocksStore::Open(options, &store_).ok());
    agent::DispatcherOptions d;
    store::Store* served = store_.get();
    if (!with_checkpoint)
      served = (plain_ = std::make_unique<store::ForwardingStore>(served)).get();
    dispatcher_ = std::make_unique<agent::Dispatcher>(config_, deriver_, served, d);
  }
  json Call(const json& request) {
    return json::parse(dispatcher_->HandleLine(peer_, request.dump()), nullptr, false);
  }
  std::string Code(const json& request) {
    json r = Call(request);
    return r.contains("error") ? r["error"].value("code", "") : "ok";
  }

  TempDir dir_;
  normalizers::KeyDeriver deriver_{kTestSecret};
  agent::Config config_;
  std::unique_ptr<store::RocksStore> store_;
  std::unique_ptr<store::ForwardingStore> plain_;
  std::unique_ptr<agent::Dispatcher> dispatcher_;
  transport::PeerCredentials peer_{1, 1000, 1000, {1000}};
};

TEST_F(BackupOp, NeedsAdminAFreshAbsoluteDestAndAWritableParent) {
  agent::Config config;
  std::string error;
  ASSERT_TRUE(agent::ParseConfig(R"({"access": [{"uid": 1000, "tenants": ["*"]},
                                                {"uid": 2000, "tenants": ["*"], "admin": true}]})",
                                 &config, &error))
      << error;
  Open(std::move(config));
  const std::string dest = dir_.path() + "/copy";
  EXPECT_EQ(Code({{"op", "backup"}, {"dest", dest}}), "forbidden");
  EXPECT_FALSE(fs::exists(dest));
  peer_ = {2, 2000, 2000, {2000}};
  EXPECT_EQ(Code({{"op", "backup"}}), "missing_field");
  EXPECT_EQ(Code({{"op", "backup"}, {"dest", "relative/copy"}}), "invalid_field");
  EXPECT_EQ(Code({{"op", "backup"}, {"dest", 7}}), "invalid_field");
  EXPECT_EQ(Code({{"op", "backup"}, {"dest", dir_.path() + "/no/such/parent"}}), "invalid_field");
  EXPECT_EQ(Code({{"op", "backup"}, {"dest", dir_.path()}}), "invalid_field");  // exists
  EXPECT_EQ(Call(BeginRequest("B-1"))["decision"], "execute");
  json r = Call({{"op", "backup"}, {"dest", dest}});
  ASSERT_TRUE(r.value("ok", false)) << r.dump();
  EXPECT_EQ(r["dest"], dest);
  EXPECT_GT(r["files"].get<int>(), 0);
  EXPECT_GT(r["bytes"].get<int>(), 0);
  // The copy opens as a store holding the action.
  store::RocksOptions copy;
  copy.path = dest;
  std::unique_ptr<store::RocksStore> opened;
  ASSERT_TRUE(store::RocksStore::Open(copy, &opened).ok());
  store::Action action;
  EXPECT_TRUE(
      opened->GetAction("acme", Call(BeginRequest("B-1"))["key"].get<std::string>(), &action).ok());
}

TEST_F(BackupOp, AStoreWithoutCheckpointsSaysSo) {
  Open(agent::Config(), /*with_checkpoint=*/false);
  json r = Call({{"op", "backup"}, {"dest", dir_.path() + "/copy"}});
  EXPECT_EQ(r["error"]["code"], "invalid_state");
  EXPECT_NE(r["error"]["message"].get<std::string>().find("does not support online backups"),
            std::string::npos);
}

// A store holding every kind of record, some with bytes that are not UTF-8.
void FillStore(const std::string& path, int64_t now) {
  store::ManualClock clock(now);
  store::RocksOptions options;
  options.path = path;
  options.clock = &clock;
  std::unique_ptr<store::RocksStore> s;
  ASSERT_TRUE(store::RocksStore::Open(options, &s).ok());
  auto begin = [&](const std::string& tenant, const std::string& ref, const std::string& key,
                   int64_t lease_ms = 60000) {
    store::IntentCandidate c;
    c.tenant_id = tenant;
    c.intent_ref = ref;
    c.action_type = "pix.cobranca";
    store::Intent intent;
    intent.payload = "{\"valor\":\"" + ref + "\"}";
    intent.key = key;
    intent.rules_version = 2;
    c.candidate = intent;
    store::BeginResult r;
    EXPECT_TRUE(s->Begin(c, lease_ms, &r).ok());
    return r;
  };
  store::Action a;
  auto r1 = begin("acme", "FAT-1", "k1");
  EXPECT_TRUE(
      s->Complete("acme", "k1", r1.action.lease_token, R"({"id":"ch_1","v":1.50})", &a).ok());
  const std::string odd_tenant("t\xff\x00z", 4);
  begin(odd_tenant, "r\x80", "k2");  // started, lease live
  auto r3 = begin("acme", "FAT-3", "k3");
  EXPECT_TRUE(s->Fail("acme", "k3", r3.action.lease_token, R"({"code":"denied"})", false, &a).ok());
  auto r4 = begin("acme", "FAT-4", "k4");
  EXPECT_TRUE(s->Fail("acme", "k4", r4.action.lease_token, "\"timeout\"", true, &a).ok());
  // Amended: the intent now points at k5b, k5's action stays (no intent names it).
  begin("globex", "FAT-5", "k5", 1000);
  clock.Advance(5000);  // k5's lease expired: uncertain
  store::IntentCandidate amend;
  amend.tenant_id = "globex";
  amend.intent_ref = "FAT-5";
  amend.action_type = "pix.cobranca";
  amend.expected_key = "k5";
  store::Intent corrected;
  corrected.payload = "{\"valor\":\"1800.00\"}";
  corrected.key = "k5b";
  corrected.rules_version = 2;
  amend.candidate = corrected;
  store::AmendResult amended;
  EXPECT_TRUE(s->Amend(amend, /*force=*/true, &amended).ok());
  ASSERT_TRUE(s->Flush().ok());
}

TEST(ExportImport, EveryRecordRoundTripsIntoAnEmptyStoreAndImportingTwiceChangesNothing) {
  TempDir dir;
  const int64_t now = store::SystemClock().NowMs();  // retention runs on the system clock
  const std::string src = dir.path() + "/src";
  FillStore(src, now);
  const std::string file = dir.path() + "/export.jsonl";
  std::string out, err;
  ASSERT_EQ(RunIntentd({"export", "--data-dir", src, "--output", file}, &out, &err), 0) << err;
  EXPECT_NE(err.find("5 intents, 5 actions"), std::string::npos) << err;
  EXPECT_EQ(fs::status(file).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
  const std::string exported = ReadText(file);
  const auto lines = Lines(exported);
  ASSERT_EQ(lines.size(), 12u);  // header, 5 + 5 records, end
  EXPECT_NE(lines.front().find("\"intentd_export\":1"), std::string::npos);
  EXPECT_EQ(lines.back(), R"({"type":"end","intents":5,"actions":5})");
  // Bytes that are not UTF-8 are flagged and in base64: "t\xff\0z" -> dP8Aeg==.
  EXPECT_NE(exported.find(R"("tenant_id_b64":"dP8Aeg==")"), std::string::npos) << exported;
  EXPECT_NE(exported.find(R"("intent_ref_b64":"coA=")"), std::string::npos) << exported;
  // Payloads and responses keep their exact text.
  EXPECT_NE(exported.find(R"("response":"{\"id\":\"ch_1\",\"v\":1.50}")"), std::string::npos);

  const std::string dst = dir.path() + "/dst";
  ASSERT_EQ(RunIntentd({"import", "--data-dir", dst, "--input", file}, &out, &err), 0) << err;
  EXPECT_NE(err.find("10 added, 0 unchanged, 0 conflicts"), std::string::npos) << err;
  const std::string again = dir.path() + "/again.jsonl";
  ASSERT_EQ(RunIntentd({"export", "--data-dir", dst, "--output", again}, &out, &err), 0) << err;
  EXPECT_EQ(Records(ReadText(again)), Records(exported));

  // Twice: nothing changes.
  ASSERT_EQ(RunIntentd({"import", "--data-dir", dst, "--input", file}, &out, &err), 0) << err;
  EXPECT_NE(err.find("0 added, 10 unchanged, 0 conflicts"), std::string::npos) << err;
  const std::string third = dir.path() + "/third.jsonl";
  ASSERT_EQ(RunIntentd({"export", "--data-dir", dst, "--output", third}, &out, &err), 0) << err;
  EXPECT_EQ(Records(ReadText(third)), Records(exported));

  // The imported store works: the odd tenant's action reads back byte for
  // byte, and the lease index was rebuilt (k2 and k5 become uncertain).
  store::ManualClock later(now + 3600 * 1000);
  store::RocksOptions options;
  options.path = dst;
  options.clock = &later;
  std::unique_ptr<store::RocksStore> s;
  ASSERT_TRUE(store::RocksStore::Open(options, &s).ok());
  store::Action a;
  ASSERT_TRUE(s->GetAction(std::string("t\xff\x00z", 4), "k2", &a).ok());
  EXPECT_EQ(a.intent_ref, "r\x80");
  EXPECT_EQ(a.status, store::ActionStatus::kStarted);
  std::vector<store::Action> uncertain;
  ASSERT_TRUE(s->Uncertain(std::nullopt, 10, &uncertain).ok());
  ASSERT_EQ(uncertain.size(), 2u);
  EXPECT_EQ(uncertain[0].key, "k5");
  EXPECT_EQ(uncertain[1].key, "k2");
  store::LookupResult amended;
  ASSERT_TRUE(s->Lookup("globex", "FAT-5", "pix.cobranca", &amended).ok());
  EXPECT_EQ(amended.intent.key, "k5b");
}

TEST(ExportImport, ApprovalsAndDailyCountersRoundTripAndAnImportedPendingIntentStillWaits) {
  TempDir dir;
  const std::string src = dir.path() + "/src";
  {
    store::RocksOptions options;
    options.path = src;
    std::unique_ptr<store::RocksStore> s;
    ASSERT_TRUE(store::RocksStore::Open(options, &s).ok());
    for (const char* ref : {"FAT-PENDING", "FAT-APPROVED"}) {
      store::IntentCandidate c;
      c.tenant_id = "acme";
      c.intent_ref = ref;
      c.action_type = "pix.cobranca";
      store::Intent candidate;
      candidate.payload = R"({"valor":"180000"})";
      candidate.key = std::string("k-") + ref;
      candidate.rules_version = 2;
      c.candidate = candidate;
      c.approval_reason = "valor is 1800.00, above 1000.00";
      c.allowances = {{"pix.cobranca/valor", 180000, 0, 0},
                      {std::string("pix.cobranca/valor/cliente_id=\xff") + ref, 180000, 0, 0}};
      store::FreezeResult f;
      ASSERT_TRUE(s->Freeze(c, &f).ok());
    }
    store::LookupResult l;
    ASSERT_TRUE(
        s->DecideApproval("acme", "FAT-APPROVED", "pix.cobranca", true, "uid 7", "ok", "", &l)
            .ok());
    ASSERT_TRUE(s->Flush().ok());
  }
  const std::string file = dir.path() + "/export.jsonl";
  std::string out, err;
  ASSERT_EQ(RunIntentd({"export", "--data-dir", src, "--output", file}, &out, &err), 0) << err;
  const std::string exported = ReadText(file);
  EXPECT_NE(
      exported.find(R"("approval":{"state":"pending","reason":"valor is 1800.00, above 1000.00"})"),
      std::string::npos)
      << exported;
  // The day's counters too (a name that is not UTF-8 in base64).
  EXPECT_NE(exported.find(R"("type":"counter","tenant_id":"acme","name":"pix.cobranca/valor",)"),
            std::string::npos)
      << exported;
  EXPECT_NE(exported.find(R"({"type":"end","intents":2,"actions":0,"counters":3})"),
            std::string::npos)
      << exported;
  const std::string dst = dir.path() + "/dst";
  ASSERT_EQ(RunIntentd({"import", "--data-dir", dst, "--input", file}, &out, &err), 0) << err;
  ASSERT_EQ(RunIntentd({"import", "--data-dir", dst, "--input", file}, &out, &err), 0) << err;
  EXPECT_NE(err.find("0 added, 5 unchanged, 0 conflicts"), std::string::npos) << err;
  store::RocksOptions options;
  options.path = dst;
  std::unique_ptr<store::RocksStore> s;
  ASSERT_TRUE(store::RocksStore::Open(options, &s).ok());
  std::vector<store::Intent> pending;
  ASSERT_TRUE(s->PendingApprovals(std::nullopt, 10, &pending).ok());
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(pending[0].intent_ref, "FAT-PENDING");
  store::IntentCandidate again;
  again.tenant_id = "acme";
  again.intent_ref = "FAT-PENDING";
  again.action_type = "pix.cobranca";
  again.expected_key = "k-FAT-PENDING";
  store::BeginResult b;
  ASSERT_TRUE(s->Begin(again, 60000, &b).ok());
  EXPECT_EQ(b.decision, store::Decision::kPendingApproval);
  store::LookupResult l;
  ASSERT_TRUE(s->Lookup("acme", "FAT-APPROVED", "pix.cobranca", &l).ok());
  EXPECT_EQ(l.intent.approval.state, store::ApprovalState::kApproved);
  EXPECT_EQ(l.intent.approval.decided_by, "uid 7");
  EXPECT_EQ(l.intent.approval.note, "ok");
  std::vector<store::Counter> counters;
  ASSERT_TRUE(
      s->DayCounters("acme", store::CounterDay(store::SystemClock().NowMs()), &counters).ok());
  ASSERT_EQ(counters.size(), 3u);
  EXPECT_EQ(counters[0].name, "pix.cobranca/valor");
  EXPECT_EQ(counters[0].total, 360000);
  EXPECT_EQ(counters[0].count, 2);
}

TEST(ExportImport, AConflictingRecordIsKeptAndReported) {
  TempDir dir;
  FillStore(dir.path() + "/src", store::SystemClock().NowMs());
  const std::string file = dir.path() + "/export.jsonl";
  std::string out, err;
  ASSERT_EQ(RunIntentd({"export", "--data-dir", dir.path() + "/src", "--output", file}, &out, &err),
            0);
  ASSERT_EQ(RunIntentd({"import", "--data-dir", dir.path() + "/dst", "--input", file}, &out, &err),
            0);
  std::string text = ReadText(file);
  const std::string from = R"(\"id\":\"ch_1\")", to = R"(\"id\":\"ch_X\")";
  ASSERT_NE(text.find(from), std::string::npos);
  text.replace(text.find(from), from.size(), to);
  WriteText(file, text);
  EXPECT_EQ(RunIntentd({"import", "--data-dir", dir.path() + "/dst", "--input", file}, &out, &err),
            1);
  EXPECT_NE(err.find("0 added, 9 unchanged, 1 conflicts"), std::string::npos) << err;
  EXPECT_NE(err.find("conflict, kept the stored action (tenant acme, key k1)"), std::string::npos)
      << err;
  std::unique_ptr<store::RocksStore> s;
  store::RocksOptions options;
  options.path = dir.path() + "/dst";
  ASSERT_TRUE(store::RocksStore::Open(options, &s).ok());
  store::Action a;
  ASSERT_TRUE(s->GetAction("acme", "k1", &a).ok());
  EXPECT_EQ(a.response, R"({"id":"ch_1","v":1.50})");
}

TEST(ExportImport, TruncatedOrMalformedInputIsRefusedWithItsLine) {
  TempDir dir;
  FillStore(dir.path() + "/src", store::SystemClock().NowMs());
  const std::string file = dir.path() + "/export.jsonl";
  std::string out, err;
  ASSERT_EQ(RunIntentd({"export", "--data-dir", dir.path() + "/src", "--output", file}, &out, &err),
            0);
  const auto lines = Lines(ReadText(file));
  auto import = [&](const std::vector<std::string>& content) {
    std::string text;
    for (const auto& l : content) text += l + "\n";
    WriteText(dir.path() + "/in.jsonl", text);
    fs::remove_all(dir.path() + "/dst");
    return RunIntentd(
        {"import", "--data-dir", dir.path() + "/dst", "--input", dir.path() + "/in.jsonl"}, &out,
        &err);
  };
  std::vector<std::string> truncated(lines.begin(), lines.end() - 1);
  EXPECT_EQ(import(truncated), 1);
  EXPECT_NE(err.find("without its end line"), std::string::npos) << err;
  EXPECT_NE(err.find("10 added"), std::string::npos) << err;  // what was read is kept

  std::vector<std::string> no_header(lines.begin() + 1, lines.end());
  EXPECT_EQ(import(no_header), 1);
  EXPECT_NE(err.find("line 1: the first line is not an intentd export header"), std::string::npos)
      << err;

  std::vector<std::string> bad = lines;
  bad[2] = R"({"type":"intent","tenant_id":"acme"})";
  EXPECT_EQ(import(bad), 1);
  EXPECT_NE(err.find("line 3: intent_ref is missing"), std::string::npos) << err;

  bad = lines;
  bad[2].insert(1, R"("extra":1,)");
  EXPECT_EQ(import(bad), 1);
  EXPECT_NE(err.find("line 3: unknown member \"extra\""), std::string::npos) << err;

  bad = lines;
  bad.insert(bad.begin() + 2, bad[1]);  // one more record than the end line says
  EXPECT_EQ(import(bad), 1);
  EXPECT_NE(err.find("the end line counts"), std::string::npos) << err;
}

TEST(ExportImport, AStoreInUseIsRefusedAndRestoreNeverOverwrites) {
  TempDir dir;
  Agent agent(dir.path());
  ASSERT_TRUE(agent.started()) << agent.Log();
  std::string out, err;
  EXPECT_EQ(RunIntentd({"export", "--data-dir", agent.data_dir()}, &out, &err), 1);
  EXPECT_NE(err.find("in use"), std::string::npos) << err;
  EXPECT_EQ(out, "");  // not even the header
  EXPECT_EQ(
      RunIntentd({"import", "--data-dir", agent.data_dir(), "--input", "/dev/null"}, &out, &err),
      1);
  EXPECT_NE(err.find("in use"), std::string::npos) << err;
  EXPECT_EQ(RunIntentd({"export"}, &out, &err), 2);
  EXPECT_EQ(RunIntentd({"export", "--data-dir", dir.path() + "/none"}, &out, &err), 1);
  EXPECT_EQ(out, "");  // nothing written for a store that is not there

  // restore: the source must be a backup, the target empty or absent.
  const std::string backup = dir.path() + "/b";
  ASSERT_EQ(RunIntentd({"backup", "--socket", agent.socket_path(), backup}, &out, &err), 0) << err;
  EXPECT_EQ(RunIntentd({"restore", dir.path(), "--data-dir", dir.path() + "/r"}, &out, &err), 1);
  EXPECT_NE(err.find("is not a backup"), std::string::npos) << err;
  fs::create_directories(dir.path() + "/full");
  WriteText(dir.path() + "/full/keep.txt", "precious");
  EXPECT_EQ(RunIntentd({"restore", backup, "--data-dir", dir.path() + "/full"}, &out, &err), 1);
  EXPECT_NE(err.find("not an empty directory"), std::string::npos) << err;
  EXPECT_EQ(ReadText(dir.path() + "/full/keep.txt"), "precious");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path() + "/full"), fs::directory_iterator()),
            1);
  fs::create_directories(dir.path() + "/empty");
  EXPECT_EQ(RunIntentd({"restore", backup, "--data-dir", dir.path() + "/empty"}, &out, &err), 0)
      << err;
  EXPECT_TRUE(fs::exists(dir.path() + "/empty/CURRENT"));
  EXPECT_EQ(RunIntentd({"restore", backup}, &out, &err), 2);  // --data-dir is required
}

TEST(ExportFormat, Base64RoundTripsEveryLengthAndRefusesGarbage) {
  std::string bytes;
  for (int n = 0; n < 40; ++n) {
    std::string decoded;
    ASSERT_TRUE(cli::Base64Decode(cli::Base64Encode(bytes), &decoded)) << n;
    EXPECT_EQ(decoded, bytes);
    bytes.push_back(static_cast<char>(n * 37));
  }
  EXPECT_EQ(cli::Base64Encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(cli::Base64Encode("fo"), "Zm8=");
  std::string out;
  for (const char* bad : {"Zm8", "Zm=8", "Z===", "Zm9v!mFy", "=Zm8"}) {
    EXPECT_FALSE(cli::Base64Decode(bad, &out)) << bad;
  }
}

TEST(ExportFormat, LinesAreCheckedMemberByMember) {
  cli::ExportLine line;
  std::string error;
  store::ExportRecord record;
  record.kind = store::ExportRecord::Kind::kAction;
  record.action = {std::string("a\0b", 3),
                   "k",
                   "pix.cobranca",
                   "R",
                   store::ActionStatus::kReleased,
                   2,
                   3,
                   4,
                   "",
                   "\"e\"",
                   5,
                   6};
  record.retain_until_ms = 7;
  ASSERT_TRUE(cli::ParseExportLine(cli::ExportRecordLine(record), &line, &error)) << error;
  EXPECT_EQ(line.record.action.tenant_id, std::string("a\0b", 3));  // NUL is valid UTF-8: plain
  EXPECT_EQ(line.record.action.status, store::ActionStatus::kReleased);
  EXPECT_EQ(line.record.action.error, "\"e\"");
  EXPECT_EQ(line.record.retain_until_ms, 7);
  for (const char* bad : {
           "nope",
           "[1]",
           R"({"type":"x"})",
           R"({"intentd_export":2})",
           R"({"type":"end","intents":-1,"actions":0})",
           R"({"type":"action","tenant_id":"a","tenant_id_b64":"YQ==","key":"k"})",
       }) {
    EXPECT_FALSE(cli::ParseExportLine(bad, &line, &error)) << bad;
  }
}

}  // namespace
}  // namespace intentd::testing
