// Policy at freeze time: rules a new intent must meet before it is frozen,
// from the config's "policy" member, per action type:
//
//   "policy": {
//     "pix.cobranca": {
//       "pix_keys": {"chave_pix_destino": {"types": ["cpf", "cnpj", "email", "evp"],
//                                          "phone": "+55"}}
//     }
//   }
//
// pix_keys: a pix-key field of the action type accepts only the listed key
// types (as rules version 2 reads the key: normalizers::ReadPixKey), and with
// "phone": "+55" only phones written with their +55 country code, so that a
// bare 11-digit string that is not a valid CPF is refused rather than read as
// a mobile number. A rule only refuses (invalid_field, naming the field, what
// was read and what is accepted); it never changes a key. It applies where an
// intent's payload is frozen (a new intent, amend), not to a redelivery that
// reads a frozen one back.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "normalizers/key_derivation.h"

namespace intentd::agent {

struct PixKeyRule {
  std::string field;
  unsigned types = 0;  // bit (1 << PixKeyType) per accepted type
  bool phone_plus55 = false;
};

struct ActionPolicy {
  std::string action_type;
  std::vector<PixKeyRule> pix_keys;
};

// Parses the "policy" member against the known action types. Errors name the
// member at fault ("policy.pix.cobranca.pix_keys.chave: …").
bool ParsePolicy(const nlohmann::json& value, const normalizers::Catalog& catalog,
                 std::vector<ActionPolicy>* out, std::string* error);

// nullptr when `action_type` has no policy.
const ActionPolicy* FindPolicy(const std::vector<ActionPolicy>& policies,
                               std::string_view action_type);

// Checks a payload about to be frozen against `policy`. False with *field
// and *message (for invalid_field) when a rule refuses it. Fields the payload
// lacks are left to the derivation, which refuses them first.
bool CheckPolicy(const ActionPolicy& policy, const normalizers::PayloadSource& payload,
                 std::string* field, std::string* message);

// {"FIELD": "cpf", ...}: the type of each pix-key field of `type` in a frozen
// payload; null under rules version 1, whose form does not keep the type.
void AppendPixKeyTypes(const normalizers::ActionType& type, const nlohmann::json& frozen,
                       int rules_version, std::string* out);

}  // namespace intentd::agent
