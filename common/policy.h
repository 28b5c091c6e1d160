// Policy at freeze time: rules a new intent must meet before it is frozen,
// from the config's "policy" member, per action type:
//
//   "policy": {
//     "pix.cobranca": {
//       "pix_keys": {"chave_pix_destino": {"types": ["cpf", "cnpj", "email", "evp"],
//                                          "phone": "+55"}},
//       "money": {"valor": {"max_per_action": "5000.00",
//                           "per_day": {"max_total": "20000.00", "max_count": 200},
//                           "per_payer_per_day": {"payer": "cliente_id",
//                                                 "max_total": "2000.00", "max_count": 3},
//                           "approval_above": "1000.00"}}
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
//
// money: per money field, max_per_action, the largest amount one intent may
// freeze (whole units); above it the payload is refused with policy_refused,
// naming the rule and the limit. per_day caps the tenant's total and count
// of intents of the action type frozen on one calendar day in Brazil time
// (UTC-03:00); per_payer_per_day the same for each value of the payer field
// (a field of the action type, by its normalized value). The store counts
// them atomically with the freeze (store.h, Allowance): what counts is
// every intent frozen (a new intent, an amend), whatever becomes of its
// action; a redelivery reads the frozen intent back and counts nothing.
// approval_above: an intent whose amount is above it is frozen pending
// approval (store.h, Approval): begin grants nothing until an admin approves
// it (approve), and a denial (deny) ends it failed.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "normalizers/key_derivation.h"
#include "store/store.h"

namespace intentd::agent {

struct PixKeyRule {
  std::string field;
  unsigned types = 0;  // bit (1 << PixKeyType) per accepted type
  bool phone_plus55 = false;
};

// A daily cap; 0: no maximum.
struct DayCap {
  int64_t max_total_cents = 0;
  int64_t max_count = 0;
  bool any() const { return max_total_cents != 0 || max_count != 0; }
};

struct MoneyRule {
  std::string field;
  int64_t max_per_action_cents = 0;  // 0: no maximum
  DayCap per_day;                    // per tenant
  std::string payer_field;           // per_payer_per_day's payer; "" when none
  DayCap per_payer_per_day;
  int64_t approval_above_cents = 0;  // above it an intent waits for approval; 0: never
};

struct ActionPolicy {
  std::string action_type;
  std::vector<PixKeyRule> pix_keys;
  std::vector<MoneyRule> money;
};

// A payload a policy refuses: invalid_field (a value the action type does
// not accept: a Pix key type) or policy_refused (a valid value above a limit).
struct PolicyRefusal {
  bool invalid_field = false;
  std::string field;
  std::string message;
  // "pix_keys", "max_per_action", "per_day.max_total", "per_day.max_count",
  // "per_payer_per_day.max_total" or "per_payer_per_day.max_count".
  std::string rule;
};

// Parses the "policy" member against the known action types. Errors name the
// member at fault ("policy.pix.cobranca.pix_keys.chave: …").
bool ParsePolicy(const nlohmann::json& value, const normalizers::Catalog& catalog,
                 std::vector<ActionPolicy>* out, std::string* error);

// nullptr when `action_type` has no policy.
const ActionPolicy* FindPolicy(const std::vector<ActionPolicy>& policies,
                               std::string_view action_type);

// Checks a payload about to be frozen against `policy`: `payload` as sent,
// `derivation` its successful derivation (the normalized values). False with
// *refusal when a rule refuses it.
bool CheckPolicy(const ActionPolicy& policy, const normalizers::PayloadSource& payload,
                 const normalizers::Derivation& derivation, PolicyRefusal* refusal);

// The daily allowances (store.h) a payload that CheckPolicy accepted draws
// on, named "ACTION_TYPE/FIELD" (per_day) and
// "ACTION_TYPE/FIELD/PAYER_FIELD=VALUE" (per_payer_per_day).
void PolicyAllowances(const ActionPolicy& policy, const normalizers::Derivation& derivation,
                      std::vector<store::Allowance>* allowances);

// Why a payload that CheckPolicy accepted must wait for a person's approval
// (an amount above approval_above); "" when it need not.
std::string ApprovalReason(const ActionPolicy& policy, const normalizers::Derivation& derivation);

// The policy_refused message for the store's kRefused answer to `allowance`:
// the rule, what was counted today and what remains.
PolicyRefusal AllowanceRefused(const ActionPolicy& policy, const store::Allowance& allowance,
                               const store::AllowanceRefusal& refusal);

// {"FIELD": "cpf", ...}: the type of each pix-key field of `type` in a frozen
// payload; null under rules version 1, whose form does not keep the type.
void AppendPixKeyTypes(const normalizers::ActionType& type, const nlohmann::json& frozen,
                       int rules_version, std::string* out);

}  // namespace intentd::agent
