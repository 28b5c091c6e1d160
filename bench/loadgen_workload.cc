#include "bench/loadgen_workload.h"

#include <cstdio>

namespace intentd::bench {
namespace {

constexpr size_t kRememberedActions = 4096;
constexpr char kCrockford[] = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

}  // namespace

std::string FormatCpf(const int digits[9]) {
  int d[11];
  for (int i = 0; i < 9; ++i) d[i] = digits[i];
  for (int check = 9; check < 11; ++check) {
    int sum = 0;
    for (int i = 0; i < check; ++i) sum += d[i] * (check + 1 - i);
    const int rest = (sum * 10) % 11;
    d[check] = rest == 10 ? 0 : rest;
  }
  char text[32];  // 14 characters; room for what the compiler cannot prove
  std::snprintf(text, sizeof(text), "%d%d%d.%d%d%d.%d%d%d-%d%d", d[0], d[1], d[2], d[3], d[4], d[5],
                d[6], d[7], d[8], d[9], d[10]);
  return text;
}

Workload::Workload(const WorkloadOptions& options, int stream_id, uint64_t seed)
    : options_(options), stream_id_(stream_id), rng_(seed) {
  executed_.reserve(kRememberedActions);
}

Action Workload::Next() {
  if (!executed_.empty() && options_.redelivery_share > 0 &&
      std::uniform_real_distribution<double>(0, 1)(rng_) < options_.redelivery_share) {
    Action again = executed_[rng_() % executed_.size()];
    again.redelivery = true;
    return again;
  }
  return Fresh();
}

void Workload::RememberExecuted(const Action& action) {
  if (executed_.size() < kRememberedActions) {
    executed_.push_back(action);
  } else {
    executed_[executed_next_] = action;
    executed_next_ = (executed_next_ + 1) % kRememberedActions;
  }
}

Action Workload::Fresh() {
  Action action;
  const uint64_t n = sequence_++;
  action.tenant_id = "tenant-" + std::to_string(rng_() % options_.tenants);
  action.intent_ref =
      "FAT-" + options_.run_id + "-" + std::to_string(stream_id_) + "-" + std::to_string(n);
  action.action_type = "pix.cobranca";

  action.cliente_id.resize(26);
  for (char& c : action.cliente_id) c = kCrockford[rng_() % 32];
  const uint64_t cents = 100 + rng_() % 999900;
  action.valor = std::to_string(cents / 100) + "." + (cents % 100 < 10 ? "0" : "") +
                 std::to_string(cents % 100);
  int digits[9];
  do {
    for (int& d : digits) d = static_cast<int>(rng_() % 10);
  } while (digits[0] == digits[1]);  // never the all-equal CPFs, which are invalid
  action.chave_pix_destino = FormatCpf(digits);

  action.payload_json = R"({"cliente_id":")" + action.cliente_id + R"(","valor":")" + action.valor +
                        R"(","chave_pix_destino":")" + action.chave_pix_destino +
                        R"(","referencia_intencao":")" + action.intent_ref + R"("})";

  // A Pix provider's answer: charge id, status, QR location, amount; padded
  // to about response_bytes.
  std::string response = R"({"psp":"bench-psp","status":"ATIVA","e2e_id":"E)";
  for (int i = 0; i < 31; ++i) response += kCrockford[rng_() % 32];
  response += R"(","location":"qr.psp.example/v2/)";
  for (int i = 0; i < 32; ++i) response += "0123456789abcdef"[rng_() % 16];
  response += R"(","valor":")" + action.valor + R"(","pad":")";
  const size_t tail = 2;  // "}
  while (response.size() + tail < static_cast<size_t>(options_.response_bytes)) response += 'x';
  response += "\"}";
  action.response_json = std::move(response);
  return action;
}

}  // namespace intentd::bench
