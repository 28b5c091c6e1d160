// Group commit for synced stores: unsynced WAL writes, one sync thread.
//
// Why not RocksDB's own synced write groups (WriteOptions::sync)? There the
// group leader appends the WAL, fsyncs it and inserts the memtables while
// every other writer waits, so the disk and the CPUs take turns. Here a write
// returns from RocksDB as soon as it is in the (unsynced) WAL and memtable;
// its caller then waits (WaitDurable) or registers a callback (WhenDurable)
// for a WAL sync that starts after it. One thread runs those syncs back to
// back while anyone waits, so each sync covers every write made during the
// previous one and throughput grows with concurrency, while the CPUs make the
// next writes. Blocking and deferred callers share the same thread. Under
// load, blocking callers of Commit do not even write themselves: a writer
// thread writes their queued batches as one and hands the round to the sync
// thread (CommitQueued, rocks_impl.h says why). The
// sync itself is an fdatasync of the WAL files RocksDB appended to, through
// a file system wrapper (wal_files.h), rather than DB::SyncWAL.
#include <linux/futex.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <climits>

#include "store/rocks_impl.h"
#include "store/rocks_options.h"

namespace intentd::store {
namespace {

// Plain futex calls for the blocking wait. std::atomic::wait would do, but
// libstdc++ 12 spins with sched_yield before sleeping, and dozens of yielding
// waiters on two cores cost more than they save.
void FutexWait(std::atomic<uint32_t>* word, uint32_t expected) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT_PRIVATE, expected, nullptr,
          nullptr, 0);
}

// Returns how many threads it woke.
long FutexWake(std::atomic<uint32_t>* word, int count) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE_PRIVATE, count, nullptr,
                 nullptr, 0);
}

}  // namespace

void RocksStoreImpl::InitSynced() {
  if (h_.db != nullptr) synced_seq_.store(h_.db->GetLatestSequenceNumber());
}

void RocksStoreImpl::ResetSyncedTo(uint64_t seq) {
  uint64_t synced = synced_seq_.load();
  while (synced < seq && !synced_seq_.compare_exchange_weak(synced, seq)) {
  }
}

Status RocksStoreImpl::SyncWalNow(uint64_t* target) {
  std::string error;
  {
    std::lock_guard<std::mutex> db_lock(sync_db_mu_);
    if (h_.db == nullptr || h_.read_only) {
      error = "the store is not writable";
    } else {
      // Read before syncing: every write up to `target` is in the WAL, or
      // in RocksDB's WAL buffer, written out here first (BufferedWal).
      // (SyncAll fails from a failed append on, which may have torn it.)
      *target = std::max(*target, h_.db->GetLatestSequenceNumber());
      const auto start = std::chrono::steady_clock::now();
      error = WriteOutAndSyncWal();
      if (error.empty()) CountSync(std::chrono::steady_clock::now() - start);
    }
  }
  if (error.empty()) {
    wal_syncs_.fetch_add(1, std::memory_order_relaxed);
    uint64_t synced = synced_seq_.load();
    while (synced < *target && !synced_seq_.compare_exchange_weak(synced, *target)) {
    }
    return Status::Ok();
  }
  uint64_t failed = sync_failed_through_.load();
  while (failed < *target && !sync_failed_through_.compare_exchange_weak(failed, *target)) {
  }
  errors_->raised.store(true, std::memory_order_release);
  return Status::StorageError("write not made durable (WAL write or sync failed: " + error +
                              "); nothing was granted");
}

void RocksStoreImpl::CountSync(std::chrono::steady_clock::duration took) {
  const double seconds = std::chrono::duration<double>(took).count();
  size_t bucket = 0;
  while (bucket < kSyncBuckets && seconds > kSyncBoundsSeconds[bucket]) ++bucket;
  sync_rounds_[bucket].fetch_add(1, std::memory_order_relaxed);
  sync_ns_.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(took).count(),
                     std::memory_order_relaxed);
}

std::string RocksStoreImpl::WriteOutAndSyncWal() {
  if (BufferedWal(options_)) {
    const rocksdb::Status written = h_.db->FlushWAL(/*sync=*/false);
    if (!written.ok()) return "writing the WAL buffer: " + written.ToString();
  }
  return wal_->SyncAll();
}

void RocksStoreImpl::AddWaiterLocked(DurableWaiter w) {
  waiters_.push_back(std::move(w));
  waiters_pending_.store(waiters_.size(), std::memory_order_release);
  // One push at a time: the count passes through syncer_wants_.
  if (waiters_.size() == syncer_wants_) waiters_cv_.notify_one();
}

Status RocksStoreImpl::WaitDurable(uint64_t seq) {
  if (!options_.sync || options_.defer_sync) return Status::Ok();
  if (synced_seq_.load(std::memory_order_acquire) >= seq) return Status::Ok();
  BlockedWaiter me;
  WakeWord* word;
  {
    std::lock_guard<std::mutex> lock(waiters_mu_);
    if (syncer_stop_) return Status::StorageError("the store is closing; nothing was granted");
    AddWaiterLocked(DurableWaiter{seq, nullptr, &me, nullptr});
    word = &round_words_[gathering_round_ & 1];
  }
  return Await(me, word);
}

Status RocksStoreImpl::AwaitReadDurable() {
  if (!options_.sync || options_.defer_sync || h_.db == nullptr) return Status::Ok();
  return WaitDurable(h_.db->GetLatestSequenceNumber());
}

uint64_t RocksStoreImpl::DurabilityTicket() {
  if (!options_.sync || !options_.defer_sync) return 0;
  uint64_t latest = 0;
  {
    std::shared_lock<std::shared_mutex> guard(db_mu_);
    if (h_.db == nullptr) return 0;
    // Readers see writes up to the published sequence only, so this covers
    // everything the caller's operation wrote or read.
    latest = h_.db->GetLatestSequenceNumber();
  }
  return synced_seq_.load(std::memory_order_acquire) >= latest ? 0 : latest;
}

void RocksStoreImpl::WhenDurable(uint64_t ticket, std::function<void(const Status&)> done) {
  if (ticket == 0 || synced_seq_.load(std::memory_order_acquire) >= ticket) {
    done(Status::Ok());
    return;
  }
  {
    std::lock_guard<std::mutex> lock(waiters_mu_);
    if (!syncer_stop_) {
      AddWaiterLocked(DurableWaiter{ticket, std::move(done), nullptr, nullptr});
      return;
    }
  }
  done(Status::StorageError("the store is closing; nothing was granted"));
}

void RocksStoreImpl::StartSyncer() {
  // Named like RocksDB's own threads ("rocksdb:high"), for top -H and ps -L.
  if (options_.sync) {
    syncer_ = std::thread([this] {
      pthread_setname_np(pthread_self(), "intentd-sync");
      SyncerLoop();
    });
  }
  if (BlockingSync()) {
    writer_ = std::thread([this] {
      pthread_setname_np(pthread_self(), "intentd-writer");
      WriterLoop();
    });
  }
}

Status RocksStoreImpl::CommitQueued(rocksdb::WriteBatch* batch) {
  BlockedWaiter me;
  WakeWord* word;
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    if (writer_stop_) return Status::StorageError("the store is closing; nothing was granted");
    queue_.push_back(QueuedWrite{batch, &me});
    word = &queue_words_[queue_round_ % kQueueWords];
    if (queue_.size() == 1) queue_cv_.notify_one();
  }
  return Await(me, word);
}

Status RocksStoreImpl::Await(BlockedWaiter& me, WakeWord* word) {
  // Woken with the whole round; a wake-up for another round on the same word
  // finds `answered` still 0 and sleeps again.
  for (;;) {
    const uint32_t seen = word->value.load(std::memory_order_acquire);
    if (me.answered.load(std::memory_order_acquire) != 0) break;
    FutexWait(&word->value, seen);
    // Any thread back from a sleep relays, also one woken for another
    // round: the bits were set after the bumps of the words' values, so
    // whoever takes them wakes every thread that slept on an old value,
    // and a thread not yet asleep finds the new value and does not sleep.
    RelayWakeUps();
  }
  return me.result;
}

uint32_t RocksStoreImpl::WordBit(const WakeWord* word) const {
  // Equality only: ordering pointers into different arrays is unspecified.
  for (size_t j = 0; j < 2; ++j) {
    if (word == &round_words_[j]) return uint32_t{1} << (kQueueWords + j);
  }
  return uint32_t{1} << (word - queue_words_);
}

RocksStoreImpl::WakeWord* RocksStoreImpl::WordOfBit(int bit) {
  return bit < static_cast<int>(kQueueWords) ? &queue_words_[bit]
                                             : &round_words_[bit - kQueueWords];
}

void RocksStoreImpl::RelayWakeUps() {
  if (relay_words_.load(std::memory_order_relaxed) == 0) return;
  uint32_t bits = relay_words_.exchange(0, std::memory_order_acq_rel);
  for (; bits != 0; bits &= bits - 1) FutexWake(&WordOfBit(__builtin_ctz(bits))->value, INT_MAX);
}

uint32_t RocksStoreImpl::AnswerRound(WriteRound& round, const Status& status) {
  for (BlockedWaiter* w : round.callers) {
    w->result = status;
    w->answered.store(1, std::memory_order_release);  // `w` may be gone now
  }
  round.word->value.fetch_add(1, std::memory_order_release);
  return WordBit(round.word);
}

void RocksStoreImpl::WakeAnswered(uint32_t bits) {
  if (bits == 0) return;
  relay_words_.fetch_or(bits, std::memory_order_release);
  // One sleeper suffices: it relays every bit. A word nobody sleeps on
  // wakes no one; its bit stays for the next relay (one spare system call),
  // since clearing it could race with another round's bit on that word.
  for (; bits != 0; bits &= bits - 1) {
    if (FutexWake(&WordOfBit(__builtin_ctz(bits))->value, 1) > 0) return;
  }
}

void RocksStoreImpl::WriterLoop() {
  std::vector<QueuedWrite> writes;
  for (;;) {
    WakeWord* word;
    {
      std::unique_lock<std::mutex> lock(queue_mu_);
      queue_cv_.wait(lock, [&] { return writer_stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      writes.swap(queue_);
      word = &queue_words_[queue_round_++ % kQueueWords];
    }
    // One write of every batch. A batch's serialized form (WriteBatch::Data,
    // the WriteBatch(rep) constructor) is a header, the sequence number
    // (fixed64) and the record count (fixed32 little-endian), then the
    // records: concatenate the records and add up the counts. The callers
    // hold db_mu_ shared until answered, so h_.db stays while this runs.
    constexpr size_t kHeader = 12, kCountAt = 8;
    std::string rep = writes[0].batch->Data();
    uint32_t count = writes[0].batch->Count();
    for (size_t i = 1; i < writes.size(); ++i) {
      rep.append(writes[i].batch->Data(), kHeader, std::string::npos);
      count += writes[i].batch->Count();
    }
    for (size_t b = 0; b < 4; ++b) rep[kCountAt + b] = static_cast<char>((count >> (8 * b)) & 0xff);
    rocksdb::WriteBatch merged(std::move(rep));
    auto round = std::make_unique<WriteRound>();
    round->word = word;
    round->callers.reserve(writes.size());
    for (const QueuedWrite& w : writes) round->callers.push_back(w.me);
    writes.clear();
    const rocksdb::Status rs = h_.db->Write(write_options_, &merged);
    if (!rs.ok()) {
      errors_->raised.store(true, std::memory_order_release);
      WakeAnswered(AnswerRound(
          *round,
          Status::StorageError("write not made durable; nothing was granted: " + rs.ToString())));
      continue;
    }
    writes_.fetch_add(round->callers.size(), std::memory_order_relaxed);
    // Covers these writes and whatever their callers read before.
    const uint64_t ticket = h_.db->GetLatestSequenceNumber();
    std::lock_guard<std::mutex> lock(waiters_mu_);
    AddWaiterLocked(DurableWaiter{ticket, nullptr, nullptr, std::move(round)});
  }
}

void RocksStoreImpl::StopSyncer() {
  if (writer_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(queue_mu_);
      writer_stop_ = true;
    }
    queue_cv_.notify_one();
    writer_.join();
  }
  if (!syncer_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(waiters_mu_);
    syncer_stop_ = true;
  }
  waiters_cv_.notify_one();
  syncer_.join();
}

void RocksStoreImpl::SyncerLoop() {
  std::vector<DurableWaiter> round;
  WriteRound blocked;   // the WaitDurable callers of `round`
  uint64_t parity = 0;  // of the round in `round`
  size_t last_round = 0;
  std::chrono::steady_clock::duration last_sync{};
  // The spin and the gather below serve deferred callers (the agent: one io
  // thread, whose next requests come microseconds after a round). Blocking
  // callers have neither: their rounds come from the writer thread, which
  // already writes whatever queued while it wrote, and right after a round
  // the woken callers and the writer need both CPUs, which a spinning or
  // gathering sync thread takes or delays. bench_store --threads=64,
  // alternated in the same minutes: median 16,350 pairs/s with them,
  // 18,300 without (six runs each); 1 and 8 threads no slower.
  const bool deferred = !BlockingSync();
  for (;;) {
    // Right after a round, the next requests are usually microseconds away:
    // watch for them a little before sleeping. A sleeping thread on a
    // virtual machine can take milliseconds to wake (measured here: a lone
    // fdatasync took 4 ms with the CPU idle, 0.5 ms with it busy).
    const auto spin_until = std::chrono::steady_clock::now() + kSyncerSpin;
    while (deferred && waiters_pending_.load(std::memory_order_acquire) == 0 &&
           std::chrono::steady_clock::now() < spin_until) {
      __builtin_ia32_pause();
    }
    {
      std::unique_lock<std::mutex> lock(waiters_mu_);
      syncer_wants_ = 1;
      waiters_cv_.wait(lock, [&] { return syncer_stop_ || !waiters_.empty(); });
      if (waiters_.empty()) return;  // stopping, and every waiter was answered
      // Gather: the connections the last sync answered are usually about
      // to send their next requests; starting the next sync with the first
      // of them only would make the others wait two syncs. Wait for as
      // many as last time, for at most half the last sync's duration.
      if (deferred && last_round > 1 && waiters_.size() < last_round) {
        const auto until = std::chrono::steady_clock::now() +
                           std::min<std::chrono::steady_clock::duration>(last_sync / 2, kGatherMax);
        syncer_wants_ = last_round;
        waiters_cv_.wait_until(lock, until, [&] {
          return syncer_stop_ || waiters_.size() >= last_round;
        });
      }
      round.swap(waiters_);
      parity = gathering_round_++ & 1;
      waiters_pending_.store(0, std::memory_order_release);
    }
    last_round = round.size();
    // Every ticket in the round was taken before this sync reads its target.
    uint64_t target = 0;
    for (const DurableWaiter& w : round) target = std::max(target, w.ticket);
    const auto sync_start = std::chrono::steady_clock::now();
    const Status synced = SyncWalNow(&target);
    last_sync = std::chrono::steady_clock::now() - sync_start;
    // Blocked callers are answered in place and woken together (WakeWord):
    // one wake-up system call per caller cost ~14 us each here (the waking
    // thread is preempted by the woken ones on a 2-core machine).
    blocked.callers.clear();
    blocked.word = &round_words_[parity];
    uint32_t answered = 0;
    for (DurableWaiter& w : round) {
      if (w.written != nullptr) {
        answered |= AnswerRound(*w.written, synced);
      } else if (w.blocked != nullptr) {
        blocked.callers.push_back(w.blocked);
      }
    }
    if (!blocked.callers.empty()) answered |= AnswerRound(blocked, synced);
    WakeAnswered(answered);
    for (DurableWaiter& w : round) {
      if (w.done) w.done(synced);
    }
    round.clear();
  }
}

}  // namespace intentd::store
