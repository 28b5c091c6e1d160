// The `seen` op's records against every backend: first sighting and
// duplicates, batches in order, retention by the last sighting, claims and
// `done`, forget, restart, and racing sightings.
#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include <algorithm>
#include <atomic>
#include <latch>
#include <map>
#include <random>
#include <thread>

#include "store/decision.h"
#include "store/rocks/codec.h"
#include "tests/store/contract_fixture.h"

namespace intentd::store::testing {
namespace {

using Code = Status::Code;

SeenRequest Sightings(const std::vector<std::string>& ids, int64_t ttl_ms = 0, int64_t lease_ms = 0,
                      const std::string& tenant = "acme", const std::string& channel = "whatsapp") {
  SeenRequest r;
  r.tenant_id = tenant;
  r.channel = channel;
  for (const auto& id : ids) r.messages.push_back({id, ""});
  r.ttl_ms = ttl_ms;
  r.lease_ms = lease_ms;
  return r;
}

class MessagesContract : public StoreContract {
 protected:
  // One sighting; a gtest failure unless the store answers Ok.
  SeenAnswer See(const std::string& id, int64_t ttl_ms = 0, int64_t lease_ms = 0,
                 const std::string& meta = "", const std::string& tenant = "acme",
                 const std::string& channel = "whatsapp") {
    SeenRequest r = Sightings({id}, ttl_ms, lease_ms, tenant, channel);
    r.messages[0].meta = meta;
    std::vector<SeenAnswer> answers;
    const Status s = store_->Seen(r, &answers);
    EXPECT_TRUE(s.ok()) << s.message();
    if (answers.size() != 1) {
      ADD_FAILURE() << "expected one answer, got " << answers.size();
      return SeenAnswer();
    }
    return answers[0];
  }
};

TEST_P(MessagesContract, FirstSightingThenDuplicatesKeepTheFirstMeta) {
  const SeenAnswer first = See("wamid.1", 0, 0, R"({"from":"5511"})");
  EXPECT_TRUE(first.first);
  EXPECT_EQ(first.record.state, MessageState::kSeen);
  EXPECT_EQ(first.record.count, 1);
  EXPECT_EQ(first.record.first_seen_at_ms, kT0);
  EXPECT_EQ(first.record.meta, R"({"from":"5511"})");
  EXPECT_EQ(first.record.lease_token, 0);
  clock_.Advance(5000);
  const SeenAnswer again = See("wamid.1", 0, 0, R"({"from":"other"})");
  EXPECT_FALSE(again.first);
  EXPECT_EQ(again.record.count, 2);
  EXPECT_EQ(again.record.first_seen_at_ms, kT0);
  EXPECT_EQ(again.record.last_seen_at_ms, kT0 + 5000);
  EXPECT_EQ(again.record.meta, R"({"from":"5511"})");
  EXPECT_EQ(See("wamid.1").record.count, 3);
}

TEST_P(MessagesContract, TenantsAndChannelsAreSeparate) {
  EXPECT_TRUE(See("m", 0, 0, "", "acme", "whatsapp").first);
  EXPECT_TRUE(See("m", 0, 0, "", "other", "whatsapp").first);
  EXPECT_TRUE(See("m", 0, 0, "", "acme", "instagram").first);
  // Length-prefixed keys: ("a\0b", "c") is not ("a", "b\0c").
  EXPECT_TRUE(See("c", 0, 0, "", std::string("a\0b", 3), "x").first);
  EXPECT_TRUE(See(std::string("b\0c", 3), 0, 0, "", "a", "x").first);
  EXPECT_FALSE(See("m", 0, 0, "", "acme", "whatsapp").first);
}

TEST_P(MessagesContract, ABatchIsAnsweredInOrderAndARepeatedIdIsADuplicate) {
  EXPECT_TRUE(See("old").first);
  std::vector<SeenAnswer> answers;
  SeenRequest r = Sightings({"a", "old", "b", "a", "c", "a"});
  r.messages[0].meta = "1";
  r.messages[3].meta = "2";
  ASSERT_TRUE(store_->Seen(r, &answers).ok());
  ASSERT_EQ(answers.size(), 6u);
  const std::vector<bool> first = {true, false, true, false, true, false};
  const std::vector<int64_t> count = {1, 2, 1, 2, 1, 3};
  for (size_t i = 0; i < answers.size(); ++i) {
    EXPECT_EQ(answers[i].first, first[i]) << i;
    EXPECT_EQ(answers[i].record.message_id, r.messages[i].message_id) << i;
    EXPECT_EQ(answers[i].record.count, count[i]) << i;
  }
  EXPECT_EQ(answers[5].record.meta, "1");
  EXPECT_EQ(See("a").record.count, 4);
  EXPECT_EQ(See("c").record.count, 2);
}

TEST_P(MessagesContract, TheRecordLivesTtlAfterItsLastSightingThenReadsAsNeverSeen) {
  constexpr int64_t kTtl = 10'000;
  EXPECT_EQ(See("m", kTtl).record.retain_until_ms, kT0 + kTtl);
  clock_.Advance(kTtl - 1);
  const SeenAnswer dup = See("m", kTtl);  // moves the deadline
  EXPECT_FALSE(dup.first);
  EXPECT_EQ(dup.record.retain_until_ms, kT0 + 2 * kTtl - 1);
  clock_.Advance(kTtl - 1);
  EXPECT_FALSE(See("m", 1).first);  // a shorter ttl never brings the deadline closer
  clock_.Advance(1);
  const SeenAnswer fresh = See("m", kTtl);
  EXPECT_TRUE(fresh.first);
  EXPECT_EQ(fresh.record.count, 1);
  EXPECT_EQ(fresh.record.first_seen_at_ms, clock_.NowMs());
}

TEST_P(MessagesContract, RetentionDropsExpiredRecordsAndKeepsLiveOnes) {
  See("short", 1000);
  See("long", 100 * kDay);
  clock_.Advance(2000);
  ASSERT_TRUE(Compact().ok());
  if (postgres_ != nullptr) {  // the purge found nothing left to delete
    size_t deleted = 1;
    ASSERT_TRUE(postgres_->PurgeExpired(1000, &deleted).ok());
    EXPECT_EQ(deleted, 0u);
  } else {
    // Reads hide an expired record either way: look at the column family,
    // where only the message retention filter can have dropped it.
    store_.reset();
    rocksdb::DBOptions options;
    std::vector<std::string> names;
    ASSERT_TRUE(rocksdb::DB::ListColumnFamilies(options, dir_.path(), &names).ok());
    std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
    for (const auto& n : names) cfs.emplace_back(n, rocksdb::ColumnFamilyOptions());
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::OpenForReadOnly(options, dir_.path(), cfs, &handles, &db).ok());
    rocksdb::ColumnFamilyHandle* messages = nullptr;
    for (auto* h : handles) {
      if (h->GetName() == "messages") messages = h;
    }
    ASSERT_NE(messages, nullptr);
    std::string value;
    EXPECT_TRUE(db->Get(rocksdb::ReadOptions(), messages,
                        codec::MessageKey("acme", "whatsapp", "short"), &value)
                    .IsNotFound());
    EXPECT_TRUE(db->Get(rocksdb::ReadOptions(), messages,
                        codec::MessageKey("acme", "whatsapp", "long"), &value)
                    .ok());
    for (auto* h : handles) db->DestroyColumnFamilyHandle(h);
    delete db;
    Reopen();
  }
  EXPECT_TRUE(See("short").first);
  EXPECT_FALSE(See("long").first);
}

TEST_P(MessagesContract, TheDefaultTtlIsTheRetentionButAtLeastSevenDays) {
  // The fixture's stores keep records 30 days.
  EXPECT_EQ(See("m").record.retain_until_ms, kT0 + 30 * kDay);
  EXPECT_EQ(DefaultMessageTtlMs(30 * kDay), 30 * kDay);
  EXPECT_EQ(DefaultMessageTtlMs(kDay), 7 * kDay);
}

TEST_P(MessagesContract, AClaimIsTakenOverOnlyAfterItsLeaseExpires) {
  constexpr int64_t kLease = 60'000;
  const SeenAnswer claim = See("m", 0, kLease);
  EXPECT_TRUE(claim.first);
  EXPECT_EQ(claim.record.state, MessageState::kProcessing);
  EXPECT_EQ(claim.record.lease_token, 1);
  EXPECT_EQ(claim.record.lease_until_ms, kT0 + kLease);
  clock_.Advance(kLease - 10);
  const SeenAnswer busy = See("m", 0, kLease);
  EXPECT_FALSE(busy.first);
  EXPECT_EQ(busy.retry_after_ms, 10);
  EXPECT_FALSE(See("m").first);  // a plain sighting never takes a claim over
  clock_.Advance(10);
  const SeenAnswer retaken = See("m", 0, kLease);
  EXPECT_TRUE(retaken.first);
  EXPECT_EQ(retaken.record.lease_token, 2);
  EXPECT_EQ(retaken.record.count, 4);

  MessageRecord r;
  EXPECT_EQ(store_->MessageDone("acme", "whatsapp", "m", 1, &r).code(), Code::kLeaseLost);
  EXPECT_EQ(r.lease_token, 2);
  EXPECT_EQ(store_->MessageDone("acme", "whatsapp", "m", 3, &r).code(), Code::kInvalidState);
  ASSERT_TRUE(store_->MessageDone("acme", "whatsapp", "m", 2, &r).ok());
  EXPECT_EQ(r.state, MessageState::kDone);
  ASSERT_TRUE(store_->MessageDone("acme", "whatsapp", "m", 2, &r).ok());  // a repeat
  EXPECT_EQ(store_->MessageDone("acme", "whatsapp", "m", 1, &r).code(), Code::kInvalidState);
  clock_.Advance(10 * kLease);
  const SeenAnswer after = See("m", 0, kLease);  // done: never processed again
  EXPECT_FALSE(after.first);
  EXPECT_EQ(after.record.state, MessageState::kDone);
  EXPECT_EQ(after.retry_after_ms, 0);
}

TEST_P(MessagesContract, AClaimOutlivesATtlShorterThanItsLease) {
  // ttl 1 s, lease 60 s: the record stays while the claim lives, so a second
  // claim within the lease is a duplicate, never token 1 again.
  const SeenAnswer claim = See("wamid.short", 1000, 60000);
  ASSERT_TRUE(claim.first);
  EXPECT_GE(claim.record.retain_until_ms, claim.record.lease_until_ms);
  clock_.Advance(30000);
  const SeenAnswer during = See("wamid.short", 1000, 60000);
  EXPECT_FALSE(during.first);
  EXPECT_EQ(during.record.lease_token, 1);
  EXPECT_EQ(during.retry_after_ms, 30000);
  // Past the lease: taken over with token 2, and the first holder's done is
  // lease_lost, not the close of the new claim.
  clock_.Advance(31000);
  const SeenAnswer takeover = See("wamid.short", 1000, 60000);
  ASSERT_TRUE(takeover.first);
  EXPECT_EQ(takeover.record.lease_token, 2);
  MessageRecord record;
  EXPECT_EQ(store_->MessageDone("acme", "whatsapp", "wamid.short", 1, &record).code(),
            Code::kLeaseLost);
}

TEST_P(MessagesContract, AReleasedClaimIsTakenOverAtOnceAndFenced) {
  const SeenAnswer claim = See("wamid.r", 0, 60000);
  ASSERT_TRUE(claim.first);
  MessageRecord record;
  // Not its holder: a token never granted.
  EXPECT_EQ(store_->ReleaseMessage("acme", "whatsapp", "wamid.r", 2, &record).code(),
            Code::kInvalidState);
  clock_.Advance(1000);
  ASSERT_TRUE(store_->ReleaseMessage("acme", "whatsapp", "wamid.r", 1, &record).ok());
  EXPECT_EQ(record.state, MessageState::kProcessing);
  EXPECT_EQ(record.lease_until_ms, kT0 + 1000);
  // A repeat changes nothing.
  ASSERT_TRUE(store_->ReleaseMessage("acme", "whatsapp", "wamid.r", 1, &record).ok());
  // The next delivery takes it at once, with the next token.
  const SeenAnswer next = See("wamid.r", 0, 60000);
  ASSERT_TRUE(next.first);
  EXPECT_EQ(next.record.lease_token, 2);
  // The old holder is fenced off; the new one finishes.
  EXPECT_EQ(store_->ReleaseMessage("acme", "whatsapp", "wamid.r", 1, &record).code(),
            Code::kLeaseLost);
  EXPECT_EQ(store_->MessageDone("acme", "whatsapp", "wamid.r", 1, &record).code(),
            Code::kLeaseLost);
  ASSERT_TRUE(store_->MessageDone("acme", "whatsapp", "wamid.r", 2, &record).ok());
  EXPECT_EQ(store_->ReleaseMessage("acme", "whatsapp", "wamid.r", 2, &record).code(),
            Code::kInvalidState);  // done: nothing to give back
  // A plain sighting has no claim to give back; an unknown message none at all.
  See("wamid.plain");
  EXPECT_EQ(store_->ReleaseMessage("acme", "whatsapp", "wamid.plain", 1, &record).code(),
            Code::kInvalidState);
  EXPECT_EQ(store_->ReleaseMessage("acme", "whatsapp", "wamid.none", 1, &record).code(),
            Code::kNotFound);
}

TEST_P(MessagesContract, DoneNeedsALiveClaim) {
  MessageRecord r;
  EXPECT_EQ(store_->MessageDone("acme", "whatsapp", "none", 1, &r).code(), Code::kNotFound);
  See("plain");
  EXPECT_EQ(store_->MessageDone("acme", "whatsapp", "plain", 1, &r).code(), Code::kInvalidState);
  See("claimed", 1000, 500);
  clock_.Advance(999);  // the claim's lease expired, nobody took it over: still the caller's
  ASSERT_TRUE(store_->MessageDone("acme", "whatsapp", "claimed", 1, &r).ok());
  clock_.Advance(1);  // past the record's ttl
  EXPECT_EQ(store_->MessageDone("acme", "whatsapp", "claimed", 1, &r).code(), Code::kNotFound);
}

TEST_P(MessagesContract, ForgetDropsTheRecord) {
  See("m", 0, 0, "7");
  bool forgotten = false;
  ASSERT_TRUE(store_->ForgetMessage("acme", "whatsapp", "m", &forgotten).ok());
  EXPECT_TRUE(forgotten);
  ASSERT_TRUE(store_->ForgetMessage("acme", "whatsapp", "m", &forgotten).ok());
  EXPECT_FALSE(forgotten);
  const SeenAnswer again = See("m");
  EXPECT_TRUE(again.first);
  EXPECT_EQ(again.record.meta, "");
  See("expired", 1000);
  clock_.Advance(1000);
  ASSERT_TRUE(store_->ForgetMessage("acme", "whatsapp", "expired", &forgotten).ok());
  EXPECT_FALSE(forgotten);
}

TEST_P(MessagesContract, RecordsSurviveAReopen) {
  See("plain", 0, 0, R"(["x"])");
  See("claim", 0, 60'000);
  Reopen();
  const SeenAnswer plain = See("plain");
  EXPECT_FALSE(plain.first);
  EXPECT_EQ(plain.record.meta, R"(["x"])");
  EXPECT_EQ(plain.record.count, 2);
  MessageRecord r;
  ASSERT_TRUE(store_->MessageDone("acme", "whatsapp", "claim", 1, &r).ok());
}

TEST_P(MessagesContract, BadRequestsWriteNothing) {
  std::vector<SeenAnswer> answers;
  EXPECT_EQ(store_->Seen(Sightings({}), &answers).code(), Code::kInvalidArgument);
  EXPECT_EQ(store_->Seen(Sightings({"m"}, -1), &answers).code(), Code::kInvalidArgument);
  EXPECT_EQ(store_->Seen(Sightings({"m"}, 0, -1), &answers).code(), Code::kInvalidArgument);
  EXPECT_TRUE(See("m").first);
}

INSTANTIATE_STORE_CONTRACT(MessagesContract);

// On a synced RocksDB store, like the other races (contract_concurrency_test.cc).
class MessagesConcurrency : public StoreContract {
 protected:
  MessagesConcurrency() : StoreContract(/*rocks_sync=*/true) {}
};

TEST_P(MessagesConcurrency, SixtyFourRacingSightingsOfOneMessageGetOneFirst) {
  constexpr int kThreads = 64;
  std::latch start(kThreads);
  std::vector<std::vector<SeenAnswer>> answers(kThreads);
  std::vector<Status> statuses(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      statuses[i] = store_->Seen(Sightings({"wamid.race"}, 0, i % 2 ? 60'000 : 0), &answers[i]);
    });
  }
  for (auto& t : threads) t.join();
  int first = 0;
  std::vector<int64_t> counts;
  for (int i = 0; i < kThreads; ++i) {
    ASSERT_TRUE(statuses[i].ok()) << statuses[i].message();
    first += answers[i][0].first;
    counts.push_back(answers[i][0].record.count);
  }
  EXPECT_EQ(first, 1);
  std::sort(counts.begin(), counts.end());
  for (int i = 0; i < kThreads; ++i) EXPECT_EQ(counts[i], i + 1);  // each sighting counted once
}

TEST_P(MessagesConcurrency, RacingBatchesOverlappingInAnyOrderGetOneFirstPerId) {
  constexpr int kThreads = 16, kIds = 40;
  std::latch start(kThreads);
  std::vector<std::vector<SeenAnswer>> answers(kThreads);
  std::vector<SeenRequest> requests(kThreads);
  std::vector<Status> statuses(kThreads);
  for (int i = 0; i < kThreads; ++i) {
    std::vector<std::string> ids;
    for (int n = 0; n < kIds; ++n) ids.push_back("id-" + std::to_string(n));
    std::shuffle(ids.begin(), ids.end(), std::mt19937(i));
    ids.resize(kIds / 2 + i % (kIds / 2));
    requests[i] = Sightings(ids);
  }
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      statuses[i] = store_->Seen(requests[i], &answers[i]);
    });
  }
  for (auto& t : threads) t.join();
  std::map<std::string, int> first, seen;
  for (int i = 0; i < kThreads; ++i) {
    ASSERT_TRUE(statuses[i].ok()) << statuses[i].message();
    ASSERT_EQ(answers[i].size(), requests[i].messages.size());
    for (const SeenAnswer& a : answers[i]) {
      first[a.record.message_id] += a.first;
      ++seen[a.record.message_id];
    }
  }
  for (const auto& [id, n] : seen) {
    EXPECT_EQ(first[id], 1) << id;
    std::vector<SeenAnswer> last;
    ASSERT_TRUE(store_->Seen(Sightings({id}), &last).ok());
    ASSERT_EQ(last.size(), 1u);
    EXPECT_EQ(last[0].record.count, n + 1) << id;
  }
}

INSTANTIATE_STORE_CONTRACT(MessagesConcurrency);

}  // namespace
}  // namespace intentd::store::testing
