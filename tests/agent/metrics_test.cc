// The metrics: the `metrics` op's text against the Prometheus exposition
// format, the values it reports (manual clock: lease expiry without
// sleeping), tenant labels, and the loopback HTTP endpoint of the binary.
#include "protocol/metrics.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "agent/metrics_http.h"
#include "common/config.h"
#include "common/prometheus.h"
#include "normalizers/utf8.h"
#include "protocol/dispatcher.h"
#include "store/rocks/rocks_store.h"
#include "tests/agent/agent_util.h"
#include "tests/agent/prometheus_util.h"
#include "tests/store/forwarding_store.h"

namespace intentd::agent {
namespace {

using nlohmann::json;
using testing::ParsePrometheusText;
using testing::PixPayload;
using testing::PromFamily;
using testing::PromValue;
using testing::TempDir;

constexpr int64_t kT0 = 1796000000000;

class MetricsTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(Config()); }

  void Open(Config config) {
    dispatcher_.reset();
    store_.reset();
    config_ = std::move(config);
    store::RocksOptions options;
    options.path = dir_.path() + "/data";
    options.sync = false;
    options.clock = &clock_;
    ASSERT_TRUE(store::RocksStore::Open(options, &store_).ok());
    DispatcherOptions d;
    d.clock = &clock_;
    dispatcher_ = std::make_unique<Dispatcher>(config_, deriver_, store_.get(), d);
  }

  json Call(const json& request) {
    return json::parse(dispatcher_->HandleLine(peer_, request.dump()), nullptr, false);
  }
  json Begin(const std::string& ref, int64_t lease_ms = 10000, const std::string& tenant = "acme") {
    json p = PixPayload();
    p.erase("referencia_intencao");
    return Call({{"op", "begin"},
                 {"tenant_id", tenant},
                 {"intent_ref", ref},
                 {"action_type", "pix.cobranca"},
                 {"payload", p},
                 {"lease_ms", lease_ms}});
  }
  // The metrics op's text, parsed; fails the test when it breaks the format.
  std::vector<PromFamily> Scrape(std::string* text_out = nullptr) {
    json r = Call({{"op", "metrics"}});
    EXPECT_TRUE(r.value("ok", false)) << r.dump();
    EXPECT_EQ(r.value("content_type", ""), "text/plain; version=0.0.4; charset=utf-8");
    const std::string text = r.value("text", "");
    if (text_out) *text_out = text;
    std::vector<PromFamily> families;
    std::string error;
    EXPECT_TRUE(ParsePrometheusText(text, &families, &error)) << error << "\n" << text;
    return families;
  }

  TempDir dir_;
  store::ManualClock clock_{kT0};
  normalizers::KeyDeriver deriver_{testing::kTestSecret};
  Config config_;
  std::unique_ptr<store::RocksStore> store_;
  std::unique_ptr<Dispatcher> dispatcher_;
  transport::PeerCredentials peer_{1, 1000, 1000, {1000}};
};

TEST_F(MetricsTest, TextParsesAsPrometheusExpositionAndCountsWhatHappened) {
  json first = Begin("FAT-1");
  Begin("FAT-1");  // in_flight
  Call({{"op", "complete"},
        {"tenant_id", "acme"},
        {"key", first["key"]},
        {"lease_token", first["lease_token"]},
        {"response", {{"id", "ch_1"}}}});
  Begin("FAT-1");  // replay
  Call({{"op", "nope"}});
  std::string text;
  auto f = Scrape(&text);
  EXPECT_EQ(PromValue(f, "intentd_decisions_total", {{"decision", "execute"}}), 1);
  EXPECT_EQ(PromValue(f, "intentd_decisions_total", {{"decision", "in_flight"}}), 1);
  EXPECT_EQ(PromValue(f, "intentd_decisions_total", {{"decision", "replay"}}), 1);
  EXPECT_EQ(PromValue(f, "intentd_decisions_total", {{"decision", "recover"}}), 0);
  EXPECT_EQ(PromValue(f, "intentd_begins_total",
                      {{"action_type", "pix.cobranca"}, {"decision", "replay"}}),
            1);
  EXPECT_EQ(PromValue(f, "intentd_begins_total",
                      {{"action_type", "email.cobranca"}, {"decision", "execute"}}),
            0);
  EXPECT_EQ(PromValue(f, "intentd_errors_total", {{"code", "unknown_op"}}), 1);
  EXPECT_EQ(PromValue(f, "intentd_errors_total", {{"code", "storage_error"}}), 0);
  EXPECT_EQ(PromValue(f, "intentd_actions_completed_total"), 1);
  EXPECT_EQ(PromValue(f, "intentd_intents_created_total"), 1);
  EXPECT_EQ(PromValue(f, "intentd_intents_reused_total"), 2);
  // Every op has a histogram; begin's counts the three begins.
  EXPECT_EQ(PromValue(f, "intentd_request_duration_seconds_count", {{"op", "begin"}}), 3);
  EXPECT_EQ(
      PromValue(f, "intentd_request_duration_seconds_bucket", {{"op", "begin"}, {"le", "+Inf"}}),
      3);
  EXPECT_EQ(PromValue(f, "intentd_request_duration_seconds_count", {{"op", "amend"}}), 0);
  EXPECT_EQ(PromValue(f, "intentd_build_info",
                      {{"version", kSoftwareVersion}, {"protocol", "1"}, {"rules_version", "2"}}),
            1);
  EXPECT_GT(PromValue(f, "intentd_store_size_bytes").value_or(0), 0);
  EXPECT_EQ(PromValue(f, "intentd_start_time_seconds"), kT0 / 1000.0);
  // Never a payload, a key or a response.
  EXPECT_EQ(text.find(first["key"].get<std::string>()), std::string::npos);
  EXPECT_EQ(text.find("01J9ZQ3K8V7M2N4P6R8T0W2Y4A"), std::string::npos);
  EXPECT_EQ(text.find("ch_1"), std::string::npos);
  EXPECT_EQ(text.find("acme"), std::string::npos);  // no tenant labels by default
}

TEST_F(MetricsTest, LeasesInFlightAndUncertainFollowTheClock) {
  json a = Begin("FAT-1", 10000);
  Begin("FAT-2", 60000);
  auto f = Scrape();
  EXPECT_EQ(PromValue(f, "intentd_leases_in_flight"), 2);
  EXPECT_EQ(PromValue(f, "intentd_uncertain_actions"), 0);
  EXPECT_EQ(PromValue(f, "intentd_uncertain_oldest_expired_seconds"), 0);

  clock_.Advance(12500);  // FAT-1's lease expired 2.5 s ago
  f = Scrape();
  EXPECT_EQ(PromValue(f, "intentd_leases_in_flight"), 1);
  EXPECT_EQ(PromValue(f, "intentd_uncertain_actions"), 1);
  EXPECT_EQ(PromValue(f, "intentd_uncertain_oldest_expired_seconds"), 2.5);
  EXPECT_EQ(PromValue(f, "intentd_uncertain_count_limit_reached"), 0);

  json recovered = Begin("FAT-1", 10000);
  ASSERT_EQ(recovered["decision"], "recover");
  f = Scrape();
  EXPECT_EQ(PromValue(f, "intentd_leases_in_flight"), 2);
  EXPECT_EQ(PromValue(f, "intentd_uncertain_actions"), 0);

  // The stale worker's completion is refused and ends nothing.
  Call({{"op", "complete"},
        {"tenant_id", "acme"},
        {"key", a["key"]},
        {"lease_token", 1},
        {"response", 1}});
  EXPECT_EQ(PromValue(Scrape(), "intentd_leases_in_flight"), 2);
  Call({{"op", "fail"},
        {"tenant_id", "acme"},
        {"key", a["key"]},
        {"lease_token", recovered["lease_token"]},
        {"error", "x"},
        {"retriable", true}});
  f = Scrape();
  EXPECT_EQ(PromValue(f, "intentd_leases_in_flight"), 1);
  EXPECT_EQ(PromValue(f, "intentd_actions_released_total"), 1);
  EXPECT_EQ(PromValue(f, "intentd_lease_lost_total"), 1);
}

TEST_F(MetricsTest, TenantLabelsOnlyWhenEnabledForAdminsAndEscaped) {
  const std::string odd = "a\"b\\c\nd";  // quote, backslash, line feed
  Begin("FAT-1", 10000, odd);
  std::string text;
  Scrape(&text);
  EXPECT_EQ(text.find("tenant="), std::string::npos);

  Config config;
  std::string error;
  ASSERT_TRUE(ParseConfig(R"({"metrics": {"tenant_labels": true}})", &config, &error)) << error;
  Open(std::move(config));
  Begin("FAT-1", 10000, odd);  // in_flight (the intent persists across the reopen)
  Begin("FAT-2", 10000, "acme");
  clock_.Advance(20000);
  auto f = Scrape(&text);
  EXPECT_NE(text.find(R"(tenant="a\"b\\c\nd")"), std::string::npos) << text;
  EXPECT_EQ(
      PromValue(f, "intentd_tenant_decisions_total", {{"tenant", odd}, {"decision", "in_flight"}}),
      1);
  EXPECT_EQ(
      PromValue(f, "intentd_tenant_decisions_total", {{"tenant", "acme"}, {"decision", "execute"}}),
      1);
  EXPECT_EQ(PromValue(f, "intentd_tenant_uncertain_actions", {{"tenant", odd}}), 1);
  EXPECT_EQ(PromValue(f, "intentd_tenant_uncertain_actions", {{"tenant", "acme"}}), 1);

  // With access rules, only admins see tenant names.
  Config ruled;
  ASSERT_TRUE(ParseConfig(R"({"metrics": {"tenant_labels": true},
                              "access": [{"uid": 1000, "tenants": ["acme"]},
                                         {"uid": 2000, "tenants": ["*"], "admin": true}]})",
                          &ruled, &error))
      << error;
  Open(std::move(ruled));
  Begin("FAT-3");
  Scrape(&text);
  EXPECT_EQ(text.find("tenant="), std::string::npos);
  peer_ = {2, 2000, 2000, {2000}};
  Scrape(&text);
  EXPECT_NE(text.find(R"(intentd_tenant_decisions_total{tenant="acme",decision="execute"} 1)"),
            std::string::npos)
      << text;
  peer_ = {3, 3000, 3000, {3000}};  // no rule: forbidden, like stats
  EXPECT_EQ(Call({{"op", "metrics"}})["error"]["code"], "forbidden");
  // The HTTP listener's text judges no peer: no tenant names at all.
  EXPECT_EQ(dispatcher_->MetricsText().find("tenant="), std::string::npos);
}

TEST_F(MetricsTest, AnAdminOfSomeTenantsSeesOnlyThemAndCannotTakeTheWholeStore) {
  Config config;
  std::string error;
  ASSERT_TRUE(ParseConfig(R"({"metrics": {"tenant_labels": true},
                              "access": [{"uid": 4000, "tenants": ["acme"], "admin": true},
                                         {"uid": 2000, "tenants": ["*"], "admin": true}]})",
                          &config, &error))
      << error;
  Open(std::move(config));
  peer_ = {2, 2000, 2000, {2000}};
  Begin("FAT-1", 1000, "acme");
  Begin("FAT-2", 1000, "globex");
  clock_.Advance(5000);  // both uncertain
  peer_ = {4, 4000, 4000, {4000}};
  std::string text;
  Scrape(&text);
  EXPECT_NE(text.find(R"(tenant="acme")"), std::string::npos) << text;
  EXPECT_EQ(text.find(R"(tenant="globex")"), std::string::npos) << text;
  json listed = Call({{"op", "uncertain"}});
  ASSERT_TRUE(listed.value("ok", false)) << listed.dump();
  ASSERT_EQ(listed["actions"].size(), 1u) << listed.dump();
  EXPECT_EQ(listed["actions"][0]["tenant_id"], "acme");
  for (const char* op : {"keys", "backup"}) {
    json r = Call({{"op", op}, {"dest", "/tmp/never"}});
    EXPECT_EQ(r["error"]["code"], "forbidden") << r.dump();
    EXPECT_NE(r["error"].value("message", "").find("every tenant"), std::string::npos) << r.dump();
  }
  peer_ = {2, 2000, 2000, {2000}};
  listed = Call({{"op", "uncertain"}});
  EXPECT_EQ(listed["actions"].size(), 2u) << listed.dump();
}

TEST_F(MetricsTest, StoreFeaturesAreLeftOutWhenTheStoreHasNone) {
  store::ForwardingStore plain(store_.get());  // no optional features
  DispatcherOptions d;
  d.clock = &clock_;
  dispatcher_ = std::make_unique<Dispatcher>(config_, deriver_, &plain, d);
  std::string text;
  Scrape(&text);
  for (const char* name :
       {"intentd_store_size_bytes", "intentd_group_commit", "intentd_storage_",
        "intentd_store_writable", "intentd_store_reopens_total", "intentd_store_batch"}) {
    EXPECT_EQ(text.find(name), std::string::npos) << name;
  }
  EXPECT_NE(text.find("intentd_requests_total"), std::string::npos);
  dispatcher_.reset();
}

// A store that reports batches of statements (as PostgreSQL's does): each
// kind's histogram and request count, cumulative as Prometheus wants.
TEST_F(MetricsTest, StatementBatchesPerKindOfWrite) {
  struct Batching : store::ForwardingStore {
    using ForwardingStore::ForwardingStore;
    std::vector<store::StatementBatchCounts> StatementBatches() const override {
      store::StatementBatchCounts begin{"begin", 40, {}, 0.035};
      begin.rounds[3] = 7;  // over 0.5 ms, at most 1 ms
      begin.rounds[4] = 3;  // at most 2.5 ms
      store::StatementBatchCounts complete{"complete", 9, {}, 0.25};
      complete.rounds[store::kSyncBuckets] = 2;  // over the last bound
      return {begin, complete};
    }
  } batching(store_.get());
  DispatcherOptions d;
  d.clock = &clock_;
  dispatcher_ = std::make_unique<Dispatcher>(config_, deriver_, &batching, d);
  const std::vector<PromFamily> f = Scrape();
  const std::string h = "intentd_store_batch_duration_seconds";
  auto le = [](size_t b) { return FormatValue(store::kSyncBoundsSeconds[b]); };
  EXPECT_EQ(PromValue(f, h + "_bucket", {{"kind", "begin"}, {"le", le(2)}}), 0);
  EXPECT_EQ(PromValue(f, h + "_bucket", {{"kind", "begin"}, {"le", le(3)}}), 7);
  EXPECT_EQ(PromValue(f, h + "_bucket", {{"kind", "begin"}, {"le", le(4)}}), 10);
  EXPECT_EQ(PromValue(f, h + "_bucket", {{"kind", "begin"}, {"le", "+Inf"}}), 10);
  EXPECT_EQ(PromValue(f, h + "_count", {{"kind", "begin"}}), 10);
  EXPECT_EQ(PromValue(f, h + "_sum", {{"kind", "begin"}}), 0.035);
  EXPECT_EQ(
      PromValue(f, h + "_bucket", {{"kind", "complete"}, {"le", le(store::kSyncBuckets - 1)}}), 0);
  EXPECT_EQ(PromValue(f, h + "_bucket", {{"kind", "complete"}, {"le", "+Inf"}}), 2);
  EXPECT_EQ(PromValue(f, "intentd_store_batched_requests_total", {{"kind", "begin"}}), 40);
  EXPECT_EQ(PromValue(f, "intentd_store_batched_requests_total", {{"kind", "complete"}}), 9);
  dispatcher_.reset();
}

TEST(MetricsStorage, GroupCommitDurationsAndDiskSpaceOfASyncedStore) {
  TempDir dir;
  store::ManualClock clock{kT0};
  normalizers::KeyDeriver deriver{testing::kTestSecret};
  Config config;
  store::RocksOptions options;
  options.path = dir.path() + "/data";
  options.sync = true;
  options.clock = &clock;
  options.min_free_bytes = 3 << 20;
  std::unique_ptr<store::RocksStore> rocks;
  ASSERT_TRUE(store::RocksStore::Open(options, &rocks).ok());
  DispatcherOptions d;
  d.clock = &clock;
  Dispatcher dispatcher(config, deriver, rocks.get(), d);
  const transport::PeerCredentials peer{1, 1000, 1000, {1000}};
  for (int i = 0; i < 5; ++i) {
    json p = PixPayload();
    p.erase("referencia_intencao");
    json r =
        json::parse(dispatcher.HandleLine(peer, json{{"op", "begin"},
                                                     {"tenant_id", "acme"},
                                                     {"intent_ref", "FAT-" + std::to_string(i)},
                                                     {"action_type", "pix.cobranca"},
                                                     {"payload", p}}
                                                    .dump()));
    ASSERT_EQ(r.value("decision", ""), "execute") << r.dump();
  }
  json r = json::parse(dispatcher.HandleLine(peer, R"({"op":"metrics"})"));
  const std::string text = r.value("text", "");
  std::vector<PromFamily> f;
  std::string error;
  ASSERT_TRUE(ParsePrometheusText(text, &f, &error)) << error << "\n" << text;
  const std::optional<store::GroupCommitCounts> synced = rocks->CommitCounts();
  ASSERT_TRUE(synced.has_value());
  const store::GroupCommitCounts& counts = *synced;
  ASSERT_GE(counts.wal_syncs, 5u);  // each blocking begin waited for its own sync
  EXPECT_EQ(PromValue(f, "intentd_group_commit_duration_seconds_count"),
            static_cast<double>(counts.wal_syncs));
  EXPECT_EQ(PromValue(f, "intentd_group_commit_duration_seconds_bucket", {{"le", "+Inf"}}),
            static_cast<double>(counts.wal_syncs));
  EXPECT_GT(PromValue(f, "intentd_group_commit_duration_seconds_sum").value_or(0), 0);
  EXPECT_EQ(PromValue(f, "intentd_group_commit_writes_total"), static_cast<double>(counts.writes));
  EXPECT_EQ(PromValue(f, "intentd_storage_reserve_bytes"), 3 << 20);
  EXPECT_GT(PromValue(f, "intentd_storage_free_bytes").value_or(0), 3 << 20);
}

TEST_F(MetricsTest, AnUnsyncedStoreHasNoGroupCommit) {
  std::string text;
  Scrape(&text);  // an unsynced RocksDB store: its space and health, no group commit
  EXPECT_FALSE(store_->CommitCounts().has_value());
  EXPECT_EQ(text.find("intentd_group_commit"), std::string::npos);
  EXPECT_NE(text.find("intentd_storage_free_bytes"), std::string::npos);
  EXPECT_NE(text.find("intentd_store_writable 1"), std::string::npos) << text;
}

TEST(Prometheus, LabelValuesAreEscapedAndAlwaysUtf8) {
  EXPECT_EQ(EscapeLabelValue("plain"), "plain");
  EXPECT_EQ(EscapeLabelValue("a\"b"), "a\\\"b");
  EXPECT_EQ(EscapeLabelValue("a\\b"), "a\\\\b");
  EXPECT_EQ(EscapeLabelValue("a\nb"), "a\\nb");
  EXPECT_EQ(EscapeLabelValue("s\xc3\xa3o"), "s\xc3\xa3o");  // "são" stays
  EXPECT_EQ(EscapeLabelValue("x\xff"), "x\\\\xff");         // an invalid byte, spelled out
  EXPECT_EQ(EscapeLabelValue("\xed\xa0\x80"), "\\\\xed\\\\xa0\\\\x80");  // a surrogate
  EXPECT_EQ(EscapeHelp("a\\b\nc"), "a\\\\b\\nc");
  EXPECT_EQ(FormatValue(0.00025), "0.00025");
  EXPECT_EQ(FormatValue(1.0 / 0.0), "+Inf");
  EXPECT_TRUE(normalizers::IsValidUtf8("\xf0\x9f\x92\xb8"));
  EXPECT_FALSE(normalizers::IsValidUtf8("\xc0\xaf"));          // overlong
  EXPECT_FALSE(normalizers::IsValidUtf8("\xf4\x90\x80\x80"));  // beyond U+10FFFF
}

TEST(Prometheus, HistogramBucketsAreCumulativeWithInfEqualToCount) {
  LatencyHistogram h;
  h.Observe(50'000);          // 50 µs: the first bucket (<= 100 µs)
  h.Observe(100'000);         // exactly on a bound: that bucket (le is inclusive)
  h.Observe(3'000'000);       // 3 ms: le 0.005
  h.Observe(60'000'000'000);  // a minute: only +Inf
  LatencyHistogram::Snapshot s = h.Read();
  EXPECT_EQ(s.cumulative[0], 2u);
  EXPECT_EQ(s.cumulative[4], 2u);  // le 0.0025
  EXPECT_EQ(s.cumulative[5], 3u);  // le 0.005
  EXPECT_EQ(s.cumulative[LatencyHistogram::kBuckets - 1], 3u);
  EXPECT_EQ(s.cumulative[LatencyHistogram::kBuckets], 4u);
  EXPECT_EQ(s.count, 4u);
  EXPECT_NEAR(s.sum_seconds, 60.00315, 1e-9);
}

TEST(Prometheus, TheCheckerRefusesBrokenText) {
  std::vector<PromFamily> f;
  std::string e;
  const std::string good = "# HELP x_total X.\n# TYPE x_total counter\nx_total{a=\"1\"} 2\n";
  EXPECT_TRUE(ParsePrometheusText(good, &f, &e)) << e;
  for (const std::string& bad : std::vector<std::string>{
           "x_total 1\n",                                                        // no family
           "# HELP x_total X.\n# TYPE x_total counter\nx_total{a=\"\\q\"} 1\n",  // bad escape
           "# HELP x_total X.\n# TYPE x_total counter\nx_total 1\nx_total 2\n",  // twice
           "# HELP x X.\n# TYPE x counter\nx 1\n",                               // not _total
           "# HELP h H.\n# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\n"
           "h_sum 1\nh_count 1\n",  // decreasing
           "# HELP h H.\n# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_sum 1\nh_count 2\n",  // no
                                                                                           // +Inf
           "# HELP h H.\n# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 3\n",
           "# HELP g G.\n# TYPE g gauge\ng 1\n# HELP k K.\n# TYPE k gauge\nk 1\ng 2\n",  // split
           good.substr(0, good.size() - 1),  // no final \n
       }) {
    EXPECT_FALSE(ParsePrometheusText(bad, &f, &e)) << bad;
  }
}

TEST(MetricsConfig, TenantLabelsMemberIsCheckedLikeTheRest) {
  Config c;
  std::string error;
  EXPECT_TRUE(ParseConfig(R"({"metrics": {"tenant_labels": true, "_comment": "x"}})", &c, &error));
  EXPECT_TRUE(c.metrics.tenant_labels);
  EXPECT_FALSE(ParseConfig(R"({"metrics": {"tenant_labels": "yes"}})", &c, &error));
  EXPECT_NE(error.find("metrics.tenant_labels"), std::string::npos) << error;
  EXPECT_FALSE(ParseConfig(R"({"metrics": {"labels": true}})", &c, &error));
  EXPECT_NE(error.find("unknown member \"labels\""), std::string::npos) << error;
  EXPECT_FALSE(ParseConfig(R"({"metrics": []})", &c, &error));
}

TEST(MetricsListen, OnlyLoopbackAddressesAreAccepted) {
  std::string address, error;
  uint16_t port = 1;
  EXPECT_TRUE(ParseMetricsListen("127.0.0.1:9464", &address, &port, &error));
  EXPECT_EQ(address, "127.0.0.1");
  EXPECT_EQ(port, 9464);
  EXPECT_TRUE(ParseMetricsListen("[::1]:0", &address, &port, &error));
  EXPECT_EQ(address, "::1");
  EXPECT_TRUE(ParseMetricsListen("localhost:80", &address, &port, &error));
  EXPECT_TRUE(ParseMetricsListen("127.8.9.10:1", &address, &port, &error));
  for (const char* bad : {"0.0.0.0:9464", "10.1.2.3:9464", "[::]:9464", "example.com:9464",
                          "127.0.0.1", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:x"}) {
    EXPECT_FALSE(ParseMetricsListen(bad, &address, &port, &error)) << bad;
  }
  EXPECT_FALSE(ParseMetricsListen("0.0.0.0:9464", &address, &port, &error));
  EXPECT_NE(error.find("not a loopback address"), std::string::npos) << error;
}

// One HTTP/1.1 exchange on 127.0.0.1:port; returns the whole response.
std::string HttpExchange(uint16_t port, const std::string& request) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return "";
  }
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  (void)!write(fd, request.data(), request.size());
  std::string response;
  char buf[65536];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;)
    response.append(buf, static_cast<size_t>(n));
  close(fd);
  return response;
}

std::string Body(const std::string& response) {
  size_t at = response.find("\r\n\r\n");
  return at == std::string::npos ? "" : response.substr(at + 4);
}

TEST(MetricsHttp, TheBinaryServesMetricsOnLoopbackOnly) {
  TempDir dir;
  testing::AgentOptions options;
  options.extra_args = {"--metrics-listen", "127.0.0.1:0"};
  testing::Agent agent(dir.path(), options);
  ASSERT_TRUE(agent.started()) << agent.Log();
  std::smatch m;
  const std::string log = agent.Log();
  ASSERT_TRUE(
      std::regex_search(log, m, std::regex(R"(metrics on http://127\.0\.0\.1:(\d+)/metrics)")))
      << log;
  const uint16_t port = static_cast<uint16_t>(std::stoi(m[1]));

  testing::Client c(agent.socket_path());
  json p = PixPayload();
  p.erase("referencia_intencao");
  ASSERT_EQ(c.Call({{"op", "begin"},
                    {"tenant_id", "acme"},
                    {"intent_ref", "H-1"},
                    {"action_type", "pix.cobranca"},
                    {"payload", p}})["decision"],
            "execute");

  const std::string ok = HttpExchange(port, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_EQ(ok.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << ok;
  EXPECT_NE(ok.find("Content-Type: text/plain; version=0.0.4"), std::string::npos) << ok;
  std::vector<PromFamily> f;
  std::string error;
  ASSERT_TRUE(ParsePrometheusText(Body(ok), &f, &error)) << error;
  EXPECT_EQ(PromValue(f, "intentd_decisions_total", {{"decision", "execute"}}), 1);
  EXPECT_EQ(PromValue(f, "intentd_leases_in_flight"), 1);

  EXPECT_EQ(HttpExchange(port, "GET /nope HTTP/1.1\r\nHost: x\r\n\r\n").rfind("HTTP/1.1 404", 0),
            0u);
  const std::string post =
      HttpExchange(port, "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(post.rfind("HTTP/1.1 405", 0), 0u) << post;
  const std::string head = HttpExchange(port, "HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(head.rfind("HTTP/1.1 200", 0), 0u) << head;
  EXPECT_EQ(Body(head), "");
  EXPECT_EQ(HttpExchange(port, "garbage\r\n\r\n").find("200 OK"), std::string::npos);

  // The same text through the socket: `intentd metrics`.
  std::string out, err;
  ASSERT_EQ(testing::RunIntentd({"metrics", "--socket", agent.socket_path()}, &out, &err), 0)
      << err;
  ASSERT_TRUE(ParsePrometheusText(out, &f, &error)) << error;
  EXPECT_EQ(PromValue(f, "intentd_decisions_total", {{"decision", "execute"}}), 1);
  const std::string file = dir.path() + "/intentd.prom";
  ASSERT_EQ(testing::RunIntentd({"metrics", "--socket", agent.socket_path(), "--output", file},
                                &out, &err),
            0)
      << err;
  std::ifstream in(file);
  std::string written((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(ParsePrometheusText(written, &f, &error)) << error;

  agent.Kill(SIGTERM);
  EXPECT_EQ(agent.Wait(), 0);
}

TEST(MetricsHttp, NonLoopbackListenIsRefusedBeforeStarting) {
  TempDir dir;
  std::string out, err;
  EXPECT_EQ(testing::RunIntentd({"serve", "--socket", dir.path() + "/s", "--data-dir",
                                 dir.path() + "/d", "--metrics-listen", "0.0.0.0:9464"},
                                &out, &err,
                                {std::string("IDEMPOTENCY_HMAC_KEY=") + testing::kTestSecret}),
            2);
  EXPECT_NE(err.find("not a loopback address"), std::string::npos) << err;
}

}  // namespace
}  // namespace intentd::agent
