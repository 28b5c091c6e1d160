#include "bench/loadgen_client_key.h"

#include <nlohmann/json.hpp>

namespace intentd::bench {

ClientKeyDeriver::ClientKeyDeriver(const std::string& secret)
    : catalog_(normalizers::Catalog::Builtins()),
      type_(catalog_.Find("pix.cobranca")),
      deriver_(secret) {}

bool ClientKeyDeriver::Derive(const Action& action, std::string* key, std::string* error) const {
  const nlohmann::json payload = {{"cliente_id", action.cliente_id},
                                  {"valor", action.valor},
                                  {"chave_pix_destino", action.chave_pix_destino},
                                  {"referencia_intencao", action.intent_ref}};
  normalizers::Derivation derivation;
  normalizers::Error derive_error;
  if (!deriver_.Derive(action.tenant_id, *type_, payload, 2, &derivation, &derive_error)) {
    *error = derive_error.code + ": " + derive_error.message;
    return false;
  }
  *key = std::move(derivation.key);
  return true;
}

}  // namespace intentd::bench
