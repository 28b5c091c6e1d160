// Allowance counters (store.h, Allowance), against every backend: counted in
// the write that freezes an intent, refused writes count and freeze nothing,
// racing freezes never pass a maximum, counters follow the Brazil day and
// retention.
#include <gtest/gtest.h>

#include <latch>
#include <thread>

#include "store/decision.h"
#include "tests/store/contract_fixture.h"

namespace intentd::store::testing {
namespace {

using Code = Status::Code;

Allowance Cap(const std::string& name, int64_t amount, int64_t max_total, int64_t max_count) {
  return Allowance{name, amount, max_total, max_count};
}

IntentCandidate Capped(const std::string& ref, const std::string& key,
                       std::vector<Allowance> allowances) {
  IntentCandidate r = NewIntentRequest("acme", ref, key);
  r.allowances = std::move(allowances);
  return r;
}

class AllowanceContract : public StoreContract {
 protected:
  explicit AllowanceContract(bool rocks_sync = false) : StoreContract(rocks_sync) {}
  std::vector<Counter> Today() {
    std::vector<Counter> counters;
    Status s = store_->DayCounters("acme", CounterDay(clock_.NowMs()), &counters);
    EXPECT_TRUE(s.ok()) << s.message();
    return counters;
  }
  void ExpectCounter(const std::string& name, int64_t total, int64_t count) {
    for (const Counter& c : Today()) {
      if (c.name != name) continue;
      EXPECT_EQ(c.total, total) << name;
      EXPECT_EQ(c.count, count) << name;
      return;
    }
    ADD_FAILURE() << "no counter " << name;
  }
  bool Exists(const std::string& ref) {
    LookupResult l;
    return store_->Lookup("acme", ref, "pix.cobranca", &l).ok();
  }
};

TEST_P(AllowanceContract, ANewIntentCountsOnceAndAPassedMaximumFreezesNothing) {
  const std::vector<Allowance> caps = {Cap("pix.cobranca/valor", 10000, 25000, 0)};
  BeginResult r;
  ASSERT_TRUE(store_->Begin(Capped("A", KeyFor(1), caps), kLeaseMs, &r).ok());
  EXPECT_TRUE(r.created);
  ExpectCounter("pix.cobranca/valor", 10000, 1);
  // A redelivery reads the frozen intent back: nothing more is counted.
  IntentCandidate again = ExistingIntentRequest("acme", "A", KeyFor(1));
  again.allowances = caps;
  ASSERT_TRUE(store_->Begin(again, kLeaseMs, &r).ok());
  EXPECT_FALSE(r.created);
  // So does one that came with a candidate: it is acted on, uncounted.
  ASSERT_TRUE(store_->Begin(Capped("A", KeyFor(1), caps), kLeaseMs, &r).ok());
  EXPECT_FALSE(r.created);
  ExpectCounter("pix.cobranca/valor", 10000, 1);

  FreezeResult f;
  ASSERT_TRUE(store_->Freeze(Capped("B", KeyFor(2), caps), &f).ok());
  ExpectCounter("pix.cobranca/valor", 20000, 2);
  // 20000 + 10000 > 25000: refused, and nothing of it written.
  Status s = store_->Begin(Capped("C", KeyFor(3), caps), kLeaseMs, &r);
  ASSERT_EQ(s.code(), Code::kRefused) << s.message();
  EXPECT_EQ(r.refusal.index, 0u);
  EXPECT_EQ(r.refusal.total, 20000);
  EXPECT_EQ(r.refusal.count, 2);
  EXPECT_FALSE(Exists("C"));
  Action a;
  EXPECT_EQ(store_->GetAction("acme", KeyFor(3), &a).code(), Code::kNotFound);
  s = store_->Freeze(Capped("C", KeyFor(3), caps), &f);
  ASSERT_EQ(s.code(), Code::kRefused) << s.message();
  EXPECT_EQ(f.refusal.total, 20000);
  EXPECT_FALSE(Exists("C"));
  // What still fits is granted: exactly up to the maximum.
  ASSERT_TRUE(
      store_
          ->Begin(Capped("D", KeyFor(4), {Cap("pix.cobranca/valor", 5000, 25000, 0)}), kLeaseMs, &r)
          .ok());
  ExpectCounter("pix.cobranca/valor", 25000, 3);
  // Nothing is given back: finishing or failing an action keeps its count.
  ASSERT_TRUE(store_->Fail("acme", KeyFor(4), 1, "{}", /*retriable=*/false, &a).ok());
  ExpectCounter("pix.cobranca/valor", 25000, 3);
  // Another tenant has its own counters.
  IntentCandidate other = Capped("C", KeyFor(3), caps);
  other.tenant_id = "globex";
  ASSERT_TRUE(store_->Begin(other, kLeaseMs, &r).ok());
  std::vector<Counter> theirs;
  ASSERT_TRUE(store_->DayCounters("globex", CounterDay(clock_.NowMs()), &theirs).ok());
  ASSERT_EQ(theirs.size(), 1u);
  EXPECT_EQ(theirs[0].total, 10000);
  ExpectCounter("pix.cobranca/valor", 25000, 3);
}

TEST_P(AllowanceContract, CountsAreCappedAndEveryAllowanceOfAWriteIsAllOrNothing) {
  const Allowance tenant_cap = Cap("pix.cobranca/valor", 100, 0, 3);
  BeginResult r;
  ASSERT_TRUE(store_
                  ->Begin(Capped("A", KeyFor(1),
                                 {tenant_cap, Cap("pix.cobranca/valor/cliente=1", 100, 0, 1)}),
                          kLeaseMs, &r)
                  .ok());
  // The payer's cap refuses the second: the tenant's counter is not moved.
  Status s = store_->Begin(
      Capped("B", KeyFor(2), {tenant_cap, Cap("pix.cobranca/valor/cliente=1", 100, 0, 1)}),
      kLeaseMs, &r);
  ASSERT_EQ(s.code(), Code::kRefused) << s.message();
  EXPECT_EQ(r.refusal.index, 1u);
  EXPECT_EQ(r.refusal.count, 1);
  ExpectCounter("pix.cobranca/valor", 100, 1);
  ExpectCounter("pix.cobranca/valor/cliente=1", 100, 1);
  EXPECT_FALSE(Exists("B"));
  for (const char* ref : {"B", "C"}) {
    ASSERT_TRUE(store_->Begin(Capped(ref, KeyFor(ref[0]), {tenant_cap}), kLeaseMs, &r).ok());
  }
  s = store_->Begin(Capped("D", KeyFor(5), {tenant_cap}), kLeaseMs, &r);
  ASSERT_EQ(s.code(), Code::kRefused) << s.message();
  EXPECT_EQ(r.refusal.count, 3);
  const std::vector<Counter> today = Today();
  ASSERT_EQ(today.size(), 2u);  // in name order
  EXPECT_EQ(today[0].name, "pix.cobranca/valor");
  EXPECT_EQ(today[0].count, 3);
  EXPECT_EQ(today[1].name, "pix.cobranca/valor/cliente=1");
  // An amount above the maximum on its own is refused on a fresh counter.
  s = store_->Begin(Capped("E", KeyFor(6), {Cap("pix.cobranca/other", 900, 800, 0)}), kLeaseMs, &r);
  ASSERT_EQ(s.code(), Code::kRefused) << s.message();
  EXPECT_EQ(r.refusal.total, 0);
  EXPECT_EQ(Today().size(), 2u);
}

TEST_P(AllowanceContract, AnAmendCountsItsNewPayloadAndARefusedOneChangesNothing) {
  const std::string name = "pix.cobranca/valor";
  BeginResult r;
  FreezeResult f;
  ASSERT_TRUE(store_->Freeze(Capped("A", KeyFor(1), {Cap(name, 1000, 3000, 0)}), &f).ok());
  IntentCandidate amend = ExistingIntentRequest("acme", "A", KeyFor(1));
  amend.candidate = NewIntentRequest("acme", "A", KeyFor(2)).candidate;
  amend.allowances = {Cap(name, 1500, 3000, 0)};
  AmendResult a;
  ASSERT_TRUE(store_->Amend(amend, /*force=*/false, &a).ok());
  ExpectCounter(name, 2500, 2);
  amend.expected_key = KeyFor(2);
  amend.candidate = NewIntentRequest("acme", "A", KeyFor(3)).candidate;
  amend.allowances = {Cap(name, 600, 3000, 0)};
  Status s = store_->Amend(amend, /*force=*/false, &a);
  ASSERT_EQ(s.code(), Code::kRefused) << s.message();
  EXPECT_EQ(a.refusal.total, 2500);
  LookupResult l;
  ASSERT_TRUE(store_->Lookup("acme", "A", "pix.cobranca", &l).ok());
  EXPECT_EQ(l.intent.key, KeyFor(2));
  ExpectCounter(name, 2500, 2);
}

TEST_P(AllowanceContract, CountersFollowTheBrazilDaySurviveARestartAndExpireWithRetention) {
  const std::string name = "pix.cobranca/valor";
  // 02:59:59.999 UTC is still the day before in Brazil (UTC-03:00).
  const int64_t midnight_brt = (CounterDay(clock_.NowMs()) + 1) * kDayMs - kBrazilOffsetMs;
  clock_.Set(midnight_brt - 1);
  const int64_t day1 = CounterDay(clock_.NowMs());
  BeginResult r;
  ASSERT_TRUE(store_->Begin(Capped("A", KeyFor(1), {Cap(name, 100, 0, 1)}), kLeaseMs, &r).ok());
  ASSERT_EQ(store_->Begin(Capped("B", KeyFor(2), {Cap(name, 100, 0, 1)}), kLeaseMs, &r).code(),
            Code::kRefused);
  clock_.Set(midnight_brt);
  EXPECT_EQ(CounterDay(clock_.NowMs()), day1 + 1);
  ASSERT_TRUE(store_->Begin(Capped("B", KeyFor(2), {Cap(name, 100, 0, 1)}), kLeaseMs, &r).ok());
  Reopen();
  std::vector<Counter> counters;
  ASSERT_TRUE(store_->DayCounters("acme", day1, &counters).ok());
  ASSERT_EQ(counters.size(), 1u);
  EXPECT_EQ(counters[0].count, 1);
  EXPECT_EQ(counters[0].day, day1);
  ASSERT_EQ(store_->Begin(Capped("C", KeyFor(3), {Cap(name, 100, 0, 1)}), kLeaseMs, &r).code(),
            Code::kRefused);
  // Kept retention (30 days here) past its day's end, then gone.
  clock_.Set(CounterRetainUntil(day1, 30 * kDay) - 1);
  ASSERT_TRUE(Compact().ok());
  ASSERT_TRUE(store_->DayCounters("acme", day1, &counters).ok());
  EXPECT_EQ(counters.size(), 1u);
  clock_.Set(CounterRetainUntil(day1, 30 * kDay));
  ASSERT_TRUE(store_->DayCounters("acme", day1, &counters).ok());
  EXPECT_TRUE(counters.empty());
  ASSERT_TRUE(Compact().ok());
  ASSERT_TRUE(store_->DayCounters("acme", day1, &counters).ok());
  EXPECT_TRUE(counters.empty());
}

INSTANTIATE_STORE_CONTRACT(AllowanceContract);

// Racing freezes on one counter, through the group commit (synced RocksDB).
class AllowanceRace : public AllowanceContract {
 protected:
  AllowanceRace() : AllowanceContract(/*rocks_sync=*/true) {}
};

TEST_P(AllowanceRace, SixtyFourRacingBeginsAtTheCapEdgeGrantExactlyTheAllowance) {
  constexpr int kThreads = 64;
  // 10 of 64 fit the total; then a round where a count of 7 binds.
  struct Round {
    std::string name;
    int64_t max_total, max_count;
    int fit;
  };
  for (const Round& each : {Round{"total", 10 * 250, 0, 10}, Round{"count", 0, 7, 7}}) {
    const std::string& round = each.name;
    const int64_t max_total = each.max_total, max_count = each.max_count;
    const int fit = each.fit;
    std::latch start(kThreads);
    std::vector<Status> statuses(kThreads);
    std::vector<BeginResult> results(kThreads);
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i) {
      threads.emplace_back([&, i] {
        IntentCandidate r =
            Capped(round + "-" + std::to_string(i), KeyFor(1000 * (round == "count") + i),
                   {Cap("race/" + round, 250, max_total, max_count)});
        start.arrive_and_wait();
        statuses[i] = store_->Begin(r, kLeaseMs, &results[i]);
      });
    }
    for (auto& t : threads) t.join();
    int granted = 0, refused = 0;
    for (int i = 0; i < kThreads; ++i) {
      if (statuses[i].ok()) {
        ++granted;
        EXPECT_EQ(results[i].decision, Decision::kExecute);
      } else {
        ASSERT_EQ(statuses[i].code(), Code::kRefused) << statuses[i].message();
        ++refused;
        EXPECT_FALSE(Exists(round + "-" + std::to_string(i)));
      }
    }
    EXPECT_EQ(granted, fit) << round;
    EXPECT_EQ(refused, kThreads - fit) << round;
    std::vector<Counter> counters;
    ASSERT_TRUE(store_->DayCounters("acme", CounterDay(clock_.NowMs()), &counters).ok());
    bool found = false;
    for (const Counter& c : counters) {
      if (c.name != "race/" + round) continue;
      found = true;
      EXPECT_EQ(c.count, fit);
      EXPECT_EQ(c.total, 250 * fit);
    }
    EXPECT_TRUE(found) << round;
  }
}

INSTANTIATE_STORE_CONTRACT(AllowanceRace);

}  // namespace
}  // namespace intentd::store::testing
