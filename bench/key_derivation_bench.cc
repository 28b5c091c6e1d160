// Throughput of KeyDeriver::Derive for pix.cobranca. Prints keys/s
// ("items_per_second"); run a Release-like build:
//   bench_key_derivation --benchmark_min_time=2
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "normalizers/key_derivation.h"

namespace intentd::normalizers {
namespace {

const nlohmann::json& Payload(const char* pix_key) {
  static const nlohmann::json kBase = {{"cliente_id", "01J9ZQ3K8V7M2N4P6R8T0W2Y4A"},
                                       {"valor", "180.00"},
                                       {"referencia_intencao", "FAT-2026-000123"},
                                       {"message_id", "wamid.HBgMNTUxMTk5OTk5OTk5OQ"}};
  static thread_local nlohmann::json payload;
  payload = kBase;
  payload["chave_pix_destino"] = pix_key;
  return payload;
}

void DerivePix(benchmark::State& state, int rules_version, const char* pix_key) {
  const Catalog catalog = Catalog::Builtins();
  const ActionType& pix = *catalog.Find("pix.cobranca");
  const KeyDeriver deriver("bench-only-hmac-key-0123456789abcdef0123456789abcdef");
  const nlohmann::json payload = Payload(pix_key);
  Derivation d;
  Error error;
  for (auto _ : state) {
    if (!deriver.Derive("acme", pix, payload, rules_version, &d, &error)) {
      state.SkipWithError(error.message.c_str());
      break;
    }
    benchmark::DoNotOptimize(d.key.data());
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_DerivePixV1Cpf(benchmark::State& state) { DerivePix(state, 1, "111.222.333-44"); }
void BM_DerivePixV2Cpf(benchmark::State& state) { DerivePix(state, 2, "529.982.247-25"); }
void BM_DerivePixV2Phone(benchmark::State& state) { DerivePix(state, 2, "+55 (11) 99999-9999"); }
void BM_DerivePixV2Email(benchmark::State& state) {
  DerivePix(state, 2, " Fulano.Silva@Exemplo.COM ");
}
// Non-ASCII input goes through ICU (NFC, lowercase).
void BM_DerivePixV2EmailNonAscii(benchmark::State& state) {
  DerivePix(state, 2, "Jose\u0301.Ça@Exemplo.com.br");
}

BENCHMARK(BM_DerivePixV1Cpf);
BENCHMARK(BM_DerivePixV2Cpf);
BENCHMARK(BM_DerivePixV2Phone);
BENCHMARK(BM_DerivePixV2Email);
BENCHMARK(BM_DerivePixV2EmailNonAscii);

}  // namespace
}  // namespace intentd::normalizers

BENCHMARK_MAIN();
