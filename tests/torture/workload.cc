#include "tests/torture/workload.h"

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <thread>

#include "tests/agent/agent_util.h"

namespace intentd::torture {
namespace {

using intentd::testing::Client;
using intentd::testing::json;

const char* const kTenants[] = {"acme", "globex", "initech"};

// One connection that comes back after the agent restarts.
class Connection {
 public:
  Connection(std::string socket_path, ClientGate* gate, const std::atomic<bool>& stop)
      : socket_path_(std::move(socket_path)), gate_(gate), stop_(stop) {}

  // The parsed answer, or null when the connection broke before it arrived
  // (the request may or may not have taken effect) or `stop` was set while
  // the agent was unreachable.
  // Every attempt first passes the gate, if any.
  json Call(const json& request) {
    if (gate_) gate_->Pass(stop_);
    while (!client_ || !client_->connected()) {
      if (stop_.load()) return nullptr;
      if (gate_) gate_->Pass(stop_);
      client_ = std::make_unique<Client>(socket_path_);
      if (!client_->connected()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    json answer = client_->Call(request);
    if (!answer.is_object()) client_.reset();
    return answer;
  }

 private:
  std::string socket_path_;
  ClientGate* gate_;
  const std::atomic<bool>& stop_;
  std::unique_ptr<Client> client_;
};

// The same intent always carries the same amount and Pix key, written in one
// of several forms that normalize alike (a redelivered, re-extracted payload).
json PayloadFor(const std::string& ref, std::mt19937_64* rng) {
  const uint64_t cents = 100 + std::hash<std::string>{}(ref) % 1000000;
  const std::string units = std::to_string(cents / 100);
  const std::string frac = std::to_string(100 + cents % 100).substr(1);
  std::string valor;
  switch ((*rng)() % 3) {
    case 0:
      valor = units + "." + frac;
      break;
    case 1:
      valor = " " + units + "." + frac + "0 ";
      break;
    default:
      valor = units + "." + frac + "000";
      break;
  }
  json payload = testing::PixPayload(valor, (*rng)() % 2 ? "111.444.777-35" : "11144477735");
  if ((*rng)() % 2)
    payload["referencia_intencao"] = ref;
  else
    payload.erase("referencia_intencao");
  return payload;
}

int Percent(std::mt19937_64* rng) { return static_cast<int>((*rng)() % 100); }

std::string ErrorCode(const json& answer) {
  auto error = answer.find("error");
  if (error == answer.end() || !error->is_object()) return "(no error member)";
  auto code = error->find("code");
  return code != error->end() && code->is_string() ? code->get<std::string>() : "(no code)";
}

}  // namespace

void ClientGate::Close() {
  std::lock_guard<std::mutex> lock(mu_);
  closed_ = true;
}

void ClientGate::WaitAllHeld() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return held_ + left_ == clients_; });
}

void ClientGate::Open() {
  std::lock_guard<std::mutex> lock(mu_);
  closed_ = false;
  cv_.notify_all();
}

void ClientGate::Pass(const std::atomic<bool>& stop) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!closed_ || stop.load()) return;
  ++held_;
  cv_.notify_all();
  cv_.wait(lock, [&] { return !closed_ || stop.load(); });
  --held_;
}

void ClientGate::Leave() {
  std::lock_guard<std::mutex> lock(mu_);
  ++left_;
  cv_.notify_all();
}

void IntentPool::AddRecent(const std::string& tenant, const std::string& ref) {
  std::lock_guard<std::mutex> lock(mu_);
  if (recent_.size() < kRecent) {
    recent_.emplace_back(tenant, ref);
  } else {
    recent_[next_] = {tenant, ref};
    next_ = (next_ + 1) % kRecent;
  }
}

void IntentPool::AddAbandoned(const std::string& tenant, const std::string& ref,
                              Clock::time_point ready) {
  std::lock_guard<std::mutex> lock(mu_);
  abandoned_.emplace(ready, std::make_pair(tenant, ref));
}

bool IntentPool::PickRedelivery(std::mt19937_64* rng, std::string* tenant, std::string* ref) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!abandoned_.empty() && abandoned_.begin()->first <= Clock::now()) {
    *tenant = abandoned_.begin()->second.first;
    *ref = abandoned_.begin()->second.second;
    abandoned_.erase(abandoned_.begin());
    return true;
  }
  if (recent_.empty()) return false;
  const auto& picked = recent_[(*rng)() % recent_.size()];
  *tenant = picked.first;
  *ref = picked.second;
  return true;
}

namespace {

void RunClientLoop(int client, uint64_t seed, const WorkloadOptions& options, IntentPool* pool,
                   const std::atomic<bool>& stop, ClientLog* log) {
  log->client = client;
  std::mt19937_64 rng(seed * 1000003 + static_cast<uint64_t>(client));
  Connection conn(options.socket_path, options.gate, stop);
  for (uint64_t n = 0; !stop.load(); ++n) {
    std::string tenant, ref;
    if (Percent(&rng) >= options.redelivery_percent || !pool->PickRedelivery(&rng, &tenant, &ref)) {
      tenant = kTenants[rng() % 3];
      ref = "T" + std::to_string(seed) + "-c" + std::to_string(client) + "-" + std::to_string(n);
      pool->AddRecent(tenant, ref);
    }
    // Redelivered (again) once a lease taken now would have expired.
    const auto redeliver_at =
        IntentPool::Clock::now() + std::chrono::milliseconds(options.lease_ms + 100);
    const json begin = {{"op", "begin"},
                        {"tenant_id", tenant},
                        {"intent_ref", ref},
                        {"action_type", "pix.cobranca"},
                        {"payload", PayloadFor(ref, &rng)},
                        {"lease_ms", options.lease_ms}};
    ++log->begins_sent;
    const json answer = conn.Call(begin);
    if (!answer.is_object()) {
      ++log->begins_unanswered;
      pool->AddAbandoned(tenant, ref, redeliver_at);
      continue;
    }
    if (!answer.value("ok", false)) {
      ++log->errors[ErrorCode(answer)];
      continue;
    }
    if (answer.value("diverged", false)) ++log->errors["diverged (same intent, equal payload)"];
    BeginAck ack{tenant, ref, answer.value("key", ""), answer.value("decision", "")};
    if (ack.decision == "replay") {
      ack.replay_status = answer.value("status", "");
      ack.replay_outcome =
          ack.replay_status == "completed" ? answer["response"].dump() : answer["error"].dump();
    }
    log->begins.push_back(ack);
    if (ack.decision == "in_flight") {  // redelivered again after the holder's lease
      pool->AddAbandoned(tenant, ref,
                         IntentPool::Clock::now() +
                             std::chrono::milliseconds(answer.value("retry_after_ms", 0) + 50));
    }
    if (ack.decision != "execute" && ack.decision != "recover") continue;

    Grant grant;
    grant.tenant = tenant;
    grant.key = ack.key;
    grant.token = answer.value("lease_token", int64_t{0});
    grant.recover = ack.decision == "recover";
    grant.previous_token = answer.value("previous_lease_token", int64_t{0});
    grant.lease_until_ms = answer.value("lease_until_ms", int64_t{0});
    grant.granted_at_ms = grant.lease_until_ms - options.lease_ms;
    grant.client = client;
    log->grants.push_back(grant);

    if (options.max_work_ms > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(rng() % (options.max_work_ms + 1)));
    }
    int roll = Percent(&rng);
    if (roll < options.abandon_percent) {  // the worker "died": the lease expires
      pool->AddAbandoned(tenant, ref, redeliver_at);
      continue;
    }
    roll -= options.abandon_percent;
    Finish finish;
    finish.tenant = tenant;
    finish.key = ack.key;
    finish.token = grant.token;
    json request = {{"tenant_id", tenant}, {"key", ack.key}, {"lease_token", grant.token}};
    const std::string tag = ref + "#" + std::to_string(grant.token);
    if (roll < options.fail_retriable_percent) {
      finish.kind = FinishKind::kFailRetriable;
      request["op"] = "fail";
      request["retriable"] = true;
      request["error"] = {{"provider", "timeout"}, {"attempt", tag}};
      finish.outcome = request["error"].dump();
    } else if (roll < options.fail_retriable_percent + options.fail_final_percent) {
      finish.kind = FinishKind::kFailFinal;
      request["op"] = "fail";
      request["retriable"] = false;
      request["error"] = {{"provider", "refused"}, {"attempt", tag}};
      finish.outcome = request["error"].dump();
    } else {
      finish.kind = FinishKind::kComplete;
      request["op"] = "complete";
      request["response"] = {{"charge", "ch_" + tag}, {"client", client}};
      finish.outcome = request["response"].dump();
    }
    // Logged as sent before it is sent: a client held at the gate while it
    // repeats the request has it in its log (it may have taken effect).
    // (No other finish is logged before the loop ends: `sent` stays valid.)
    Finish& sent = log->finishes.emplace_back(std::move(finish));
    // Repeated with the same token until answered: a repeat of a finish that
    // already took effect succeeds again and changes nothing.
    for (;;) {
      const json done = conn.Call(request);
      if (!done.is_object()) {
        if (stop.load()) break;
        continue;
      }
      if (done.value("ok", false)) {
        sent.acked = true;
        sent.answered_status = done.value("status", "");
        // A retriable failure goes back to the queue: the next begin executes.
        if (sent.kind == FinishKind::kFailRetriable) {
          pool->AddAbandoned(tenant, ref, IntentPool::Clock::now());
        }
      } else {
        ++log->errors[request["op"].get<std::string>() + ": " + ErrorCode(done)];
      }
      break;
    }
  }
}

// One bot of a pipelined client: idle, or holding a grant it is finishing.
struct Slot {
  bool granted = false;
  std::string tenant, ref;
  json finish;                     // the complete/fail to send (again, while unanswered)
  size_t finish_index;             // its entry in ClientLog::finishes
  bool finish_unanswered = false;  // an attempt went unanswered: it may have taken effect
  IntentPool::Clock::time_point redeliver_at;
};

// A request of a batch, and what to do with its answer.
struct Step {
  enum class Kind { kBegin, kFinish, kSeen } kind;
  size_t slot = 0;
  json request;
  bool fresh = false;  // a begin of an intent no one sent before
  std::string tenant, ref;
  Sighting sighting;
};

bool IsStorageError(const json& answer) { return ErrorCode(answer) == "storage_error"; }

// The finish a grant ends with (complete, retriable or final fail), drawn
// from the options, logged as sent before it is sent. false: abandoned.
bool PlanFinish(int client, const WorkloadOptions& options, const Grant& grant,
                const std::string& ref, std::mt19937_64* rng, ClientLog* log, Slot* slot) {
  int roll = Percent(rng);
  if (roll < options.abandon_percent) return false;
  roll -= options.abandon_percent;
  Finish finish;
  finish.tenant = grant.tenant;
  finish.key = grant.key;
  finish.token = grant.token;
  json request = {{"tenant_id", grant.tenant}, {"key", grant.key}, {"lease_token", grant.token}};
  const std::string tag = ref + "#" + std::to_string(grant.token);
  if (roll < options.fail_retriable_percent) {
    finish.kind = FinishKind::kFailRetriable;
    request["op"] = "fail";
    request["retriable"] = true;
    request["error"] = {{"provider", "timeout"}, {"attempt", tag}};
    finish.outcome = request["error"].dump();
  } else if (roll < options.fail_retriable_percent + options.fail_final_percent) {
    finish.kind = FinishKind::kFailFinal;
    request["op"] = "fail";
    request["retriable"] = false;
    request["error"] = {{"provider", "refused"}, {"attempt", tag}};
    finish.outcome = request["error"].dump();
  } else {
    finish.kind = FinishKind::kComplete;
    request["op"] = "complete";
    request["response"] = {{"charge", "ch_" + tag}, {"client", client}};
    finish.outcome = request["response"].dump();
  }
  slot->granted = true;
  slot->finish = std::move(request);
  slot->finish_index = log->finishes.size();
  slot->finish_unanswered = false;
  log->finishes.push_back(std::move(finish));
  return true;
}

void RunPipelinedLoop(int client, uint64_t seed, const WorkloadOptions& options, IntentPool* pool,
                      const std::atomic<bool>& stop, ClientLog* log) {
  log->client = client;
  std::mt19937_64 rng(seed * 1000003 + static_cast<uint64_t>(client));
  std::vector<Slot> slots(static_cast<size_t>(options.pipeline));
  std::unique_ptr<Client> conn;
  uint64_t n = 0, m = 0;
  while (!stop.load()) {
    if (options.gate) options.gate->Pass(stop);
    while (!conn || !conn->connected()) {
      if (stop.load()) return;
      if (options.gate) options.gate->Pass(stop);
      conn = std::make_unique<Client>(options.socket_path);
      if (!conn->connected()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::vector<Step> batch;
    std::string lines;
    for (size_t i = 0; i < slots.size(); ++i) {
      Step step;
      step.slot = i;
      if (slots[i].granted) {
        step.kind = Step::Kind::kFinish;
        step.request = slots[i].finish;
      } else if (Percent(&rng) < options.seen_percent) {
        step.kind = Step::Kind::kSeen;
        step.sighting = {kTenants[rng() % 3], "whatsapp",
                         "wamid.S" + std::to_string(seed) + "-c" + std::to_string(client) + "-" +
                             std::to_string(m++)};
        step.request = {{"op", "seen"},
                        {"tenant_id", step.sighting.tenant},
                        {"channel", step.sighting.channel},
                        {"message_id", step.sighting.message_id}};
      } else {
        step.kind = Step::Kind::kBegin;
        if (Percent(&rng) >= options.redelivery_percent ||
            !pool->PickRedelivery(&rng, &step.tenant, &step.ref)) {
          step.tenant = kTenants[rng() % 3];
          step.ref = "P" + std::to_string(seed) + "-c" + std::to_string(client) + "-" +
                     std::to_string(n++);
          step.fresh = true;
        }
        step.request = {{"op", "begin"},
                        {"tenant_id", step.tenant},
                        {"intent_ref", step.ref},
                        {"action_type", "pix.cobranca"},
                        {"payload", PayloadFor(step.ref, &rng)},
                        {"lease_ms", options.lease_ms}};
      }
      lines += step.request.dump() + "\n";
      batch.push_back(std::move(step));
    }
    const int epoch = options.kill_epoch ? options.kill_epoch->load() : 0;
    const auto sent_at = std::chrono::steady_clock::now();
    bool broken = !conn->SendRaw(lines);
    for (Step& step : batch) {
      json answer;
      if (!broken) {
        int timeout_ms = 10000;
        if (options.stall_ms > 0) {
          const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
              std::chrono::steady_clock::now() - sent_at);
          timeout_ms = std::max<int>(1, options.stall_ms - static_cast<int>(waited.count()));
        }
        std::string line;
        if (conn->ReadLine(&line, timeout_ms)) {
          answer = json::parse(line, nullptr, false);
        } else {
          broken = true;
          // A timeout, not the end of the connection (the agent killed).
          const bool timed_out = std::chrono::steady_clock::now() - sent_at >=
                                 std::chrono::milliseconds(options.stall_ms);
          if (options.stall_ms > 0 && timed_out && options.kill_epoch != nullptr &&
              options.kill_epoch->load() == epoch && !stop.load()) {
            log->stalls.push_back(step.request.value("op", "") + " " +
                                  step.request.dump().substr(0, 120) + ": no answer within " +
                                  std::to_string(options.stall_ms) + " ms while the agent ran");
          }
        }
      }
      const bool answered = answer.is_object();
      const bool ok = answered && answer.value("ok", false);
      Slot& slot = slots[step.slot];
      const auto redeliver_at =
          IntentPool::Clock::now() + std::chrono::milliseconds(options.lease_ms + 100);
      switch (step.kind) {
        case Step::Kind::kSeen:
          ++log->seen_sent;
          if (!answered) break;
          if (ok && answer.value("first", false)) {
            log->seen_acked.push_back(step.sighting);
          } else if (ok) {
            log->seen_fresh_duplicates.push_back(
                step.sighting.tenant + "/" + step.sighting.message_id +
                ": a new id answered first: false (" + answer.dump().substr(0, 160) + ")");
          } else if (IsStorageError(answer)) {
            log->seen_refused.push_back(step.sighting);
          } else {
            ++log->errors["seen: " + ErrorCode(answer)];
          }
          break;
        case Step::Kind::kFinish: {
          Finish& sent = log->finishes[slot.finish_index];
          if (!answered) {
            slot.finish_unanswered = true;  // sent again with the next batch
            break;
          }
          slot.granted = false;
          if (ok) {
            sent.acked = true;
            sent.answered_status = answer.value("status", "");
            if (sent.kind == FinishKind::kFailRetriable) {
              pool->AddAbandoned(slot.tenant, slot.ref, IntentPool::Clock::now());
            }
            break;
          }
          if (IsStorageError(answer) && !slot.finish_unanswered) sent.refused = true;
          ++log->errors[slot.finish["op"].get<std::string>() + ": " + ErrorCode(answer)];
          pool->AddAbandoned(slot.tenant, slot.ref, redeliver_at);  // the lease expires
          break;
        }
        case Step::Kind::kBegin: {
          ++log->begins_sent;
          if (!answered) {
            ++log->begins_unanswered;
            pool->AddAbandoned(step.tenant, step.ref, redeliver_at);
            break;
          }
          if (!ok) {
            if (step.fresh && IsStorageError(answer)) {
              log->refused_begins.emplace_back(step.tenant, step.ref);
            } else if (!step.fresh) {
              pool->AddAbandoned(step.tenant, step.ref, redeliver_at);
            }
            ++log->errors["begin: " + ErrorCode(answer)];
            break;
          }
          if (step.fresh) pool->AddRecent(step.tenant, step.ref);
          BeginAck ack{step.tenant, step.ref, answer.value("key", ""),
                       answer.value("decision", "")};
          if (ack.decision == "replay") {
            ack.replay_status = answer.value("status", "");
            ack.replay_outcome = ack.replay_status == "completed" ? answer["response"].dump()
                                                                  : answer["error"].dump();
          }
          log->begins.push_back(ack);
          if (ack.decision == "in_flight") {
            pool->AddAbandoned(
                step.tenant, step.ref,
                IntentPool::Clock::now() +
                    std::chrono::milliseconds(answer.value("retry_after_ms", 0) + 50));
          }
          if (ack.decision != "execute" && ack.decision != "recover") break;
          Grant grant;
          grant.tenant = step.tenant;
          grant.key = ack.key;
          grant.token = answer.value("lease_token", int64_t{0});
          grant.recover = ack.decision == "recover";
          grant.previous_token = answer.value("previous_lease_token", int64_t{0});
          grant.lease_until_ms = answer.value("lease_until_ms", int64_t{0});
          grant.granted_at_ms = grant.lease_until_ms - options.lease_ms;
          grant.client = client;
          log->grants.push_back(grant);
          slot.tenant = step.tenant;
          slot.ref = step.ref;
          if (!PlanFinish(client, options, grant, step.ref, &rng, log, &slot)) {
            pool->AddAbandoned(step.tenant, step.ref, redeliver_at);  // the worker "died"
          }
          break;
        }
      }
    }
    if (!broken) {
      const int64_t ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::steady_clock::now() - sent_at)
                             .count();
      ++log->batches;
      log->batches_over_1s += ms > 1000;
      log->batch_ms_max = std::max(log->batch_ms_max, ms);
    }
    if (broken) conn.reset();
  }
}

}  // namespace

void RunClient(int client, uint64_t seed, const WorkloadOptions& options, IntentPool* pool,
               const std::atomic<bool>& stop, ClientLog* log) {
  try {
    if (options.pipeline > 1) {
      RunPipelinedLoop(client, seed, options, pool, stop, log);
    } else {
      RunClientLoop(client, seed, options, pool, stop, log);
    }
  } catch (const std::exception& e) {
    // An answer of an unexpected shape: counted, and this client stops.
    ++log->errors[std::string("client stopped on an unexpected answer: ") + e.what()];
  }
  if (options.gate) options.gate->Leave();
}

}  // namespace intentd::torture
