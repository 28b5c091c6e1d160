#include "common/policy.h"

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>

namespace intentd::agent {
namespace {

using json = nlohmann::json;

unsigned Bit(normalizers::PixKeyType t) { return 1u << static_cast<unsigned>(t); }

std::string TypeList(unsigned types) {
  std::string out;
  for (normalizers::PixKeyType t : normalizers::kPixKeyTypes) {
    if ((types & Bit(t)) == 0) continue;
    if (!out.empty()) out += ", ";
    out += normalizers::PixKeyTypeName(t);
  }
  return out;
}

unsigned AllTypes() {
  unsigned all = 0;
  for (normalizers::PixKeyType t : normalizers::kPixKeyTypes) all |= Bit(t);
  return all;
}

std::string AllTypeNames() { return TypeList(AllTypes()); }

bool ParsePixKeyRule(const std::string& at, const json& v, PixKeyRule* rule, std::string* error) {
  if (!v.is_object()) {
    *error = at + " must be an object: {\"types\": [" + AllTypeNames() + "], \"phone\": \"+55\"}";
    return false;
  }
  bool has_types = false;
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (it.key() == "types") {
      has_types = true;
      if (!it.value().is_array() || it.value().empty()) {
        *error = at + ".types must be a non-empty array of key types (" + AllTypeNames() + ")";
        return false;
      }
      for (const json& name : it.value()) {
        normalizers::PixKeyType t;
        if (!name.is_string() || !normalizers::ParsePixKeyType(name.get<std::string>(), &t)) {
          *error =
              at + ".types: " + name.dump() + " is not a Pix key type (" + AllTypeNames() + ")";
          return false;
        }
        rule->types |= Bit(t);
      }
    } else if (it.key() == "phone") {
      if (it.value() != "+55" && it.value() != "any") {
        *error = at +
                 ".phone must be \"+55\" (phones only as written with +55) or \"any\" (the "
                 "default: a bare mobile number is read as +55)";
        return false;
      }
      rule->phone_plus55 = it.value() == "+55";
    } else if (it.key().empty() || it.key()[0] != '_') {
      *error = at + ": unknown member \"" + it.key() + "\" (expected types, phone)";
      return false;
    }
  }
  if (!has_types) rule->types = AllTypes();
  return true;
}

// "5000.00" -> 500000 (whole units as text, the money kind's syntax).
bool ParseAmount(const std::string& at, const json& v, int64_t* cents, std::string* error) {
  if (!v.is_string() || !normalizers::ParseMoneyCents(v.get<std::string>(), cents)) {
    *error = at + " must be a positive amount in whole units as a string, e.g. \"5000.00\"";
    return false;
  }
  return true;
}

// {"max_total": "20000.00", "max_count": 200}, and for a payer cap "payer".
bool ParseDayCap(const std::string& at, const json& v, const normalizers::ActionType& type,
                 DayCap* cap, std::string* payer, std::string* error) {
  const std::string shape =
      payer != nullptr ? "{\"payer\": \"FIELD\", \"max_total\": \"2000.00\", \"max_count\": 3}"
                       : "{\"max_total\": \"20000.00\", \"max_count\": 200}";
  if (!v.is_object()) {
    *error = at + " must be an object: " + shape;
    return false;
  }
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (it.key() == "max_total") {
      if (!ParseAmount(at + ".max_total", it.value(), &cap->max_total_cents, error)) return false;
    } else if (it.key() == "max_count") {
      if (!it.value().is_number_integer() || it.value().get<int64_t>() <= 0) {
        *error = at + ".max_count must be a positive integer (intents per day)";
        return false;
      }
      cap->max_count = it.value().get<int64_t>();
    } else if (payer != nullptr && it.key() == "payer") {
      bool known = false;
      if (it.value().is_string()) {
        for (const normalizers::FieldSpec& f : type.fields) known |= f.name == it.value();
      }
      if (!known) {
        *error = at + ".payer must name a field of " + type.name +
                 " (its normalized value tells payers apart, e.g. \"cliente_id\")";
        return false;
      }
      *payer = it.value().get<std::string>();
    } else if (it.key().empty() || it.key()[0] != '_') {
      *error = at + ": unknown member \"" + it.key() + "\" (expected " +
               (payer != nullptr ? "payer, " : "") + "max_total, max_count)";
      return false;
    }
  }
  if (!cap->any()) {
    *error = at + " needs max_total, max_count or both: " + shape;
    return false;
  }
  if (payer != nullptr && payer->empty()) {
    *error = at + " needs \"payer\", the field that tells payers apart: " + shape;
    return false;
  }
  return true;
}

bool ParseMoneyRule(const std::string& at, const json& v, const normalizers::ActionType& type,
                    MoneyRule* rule, std::string* error) {
  if (!v.is_object()) {
    *error = at + " must be an object: {\"max_per_action\": \"5000.00\"}";
    return false;
  }
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (it.key() == "max_per_action") {
      if (!ParseAmount(at + ".max_per_action", it.value(), &rule->max_per_action_cents, error)) {
        return false;
      }
    } else if (it.key() == "approval_above") {
      if (!ParseAmount(at + ".approval_above", it.value(), &rule->approval_above_cents, error)) {
        return false;
      }
    } else if (it.key() == "per_day") {
      if (!ParseDayCap(at + ".per_day", it.value(), type, &rule->per_day, nullptr, error)) {
        return false;
      }
    } else if (it.key() == "per_payer_per_day") {
      if (!ParseDayCap(at + ".per_payer_per_day", it.value(), type, &rule->per_payer_per_day,
                       &rule->payer_field, error)) {
        return false;
      }
    } else if (it.key().empty() || it.key()[0] != '_') {
      *error = at + ": unknown member \"" + it.key() +
               "\" (expected max_per_action, per_day, per_payer_per_day, approval_above)";
      return false;
    }
  }
  return true;
}

std::string Units(int64_t cents) { return normalizers::CentsAsUnits(std::to_string(cents)); }

bool FieldOfKind(const normalizers::ActionType& type, const std::string& name,
                 normalizers::FieldKind kind) {
  for (const normalizers::FieldSpec& spec : type.fields) {
    if (spec.name == name && spec.kind == kind) return true;
  }
  return false;
}

}  // namespace

bool ParsePolicy(const json& value, const normalizers::Catalog& catalog,
                 std::vector<ActionPolicy>* out, std::string* error) {
  if (!value.is_object()) {
    *error =
        "\"policy\" must be an object of action types: {\"pix.cobranca\": {\"pix_keys\": "
        "{...}}}";
    return false;
  }
  std::vector<ActionPolicy> parsed;
  for (auto it = value.begin(); it != value.end(); ++it) {
    if (!it.key().empty() && it.key()[0] == '_') continue;
    const std::string at = "policy." + it.key();
    const normalizers::ActionType* type = catalog.Find(it.key());
    if (type == nullptr) {
      *error = at + ": unknown action type (define it under action_types)";
      return false;
    }
    if (!it.value().is_object()) {
      *error = at + " must be an object: {\"pix_keys\": {...}}";
      return false;
    }
    ActionPolicy policy;
    policy.action_type = it.key();
    for (auto m = it.value().begin(); m != it.value().end(); ++m) {
      if (m.key() == "pix_keys") {
        if (!m.value().is_object()) {
          *error = at + ".pix_keys must be an object: {\"FIELD\": {\"types\": [...]}}";
          return false;
        }
        for (auto f = m.value().begin(); f != m.value().end(); ++f) {
          const std::string field_at = at + ".pix_keys." + f.key();
          if (!FieldOfKind(*type, f.key(), normalizers::FieldKind::kPixKey)) {
            *error = field_at + ": " + it.key() + " has no pix-key field named \"" + f.key() + "\"";
            return false;
          }
          PixKeyRule rule;
          rule.field = f.key();
          if (!ParsePixKeyRule(field_at, f.value(), &rule, error)) return false;
          policy.pix_keys.push_back(std::move(rule));
        }
      } else if (m.key() == "money") {
        if (!m.value().is_object()) {
          *error = at + ".money must be an object: {\"FIELD\": {\"max_per_action\": \"5000.00\"}}";
          return false;
        }
        for (auto f = m.value().begin(); f != m.value().end(); ++f) {
          const std::string field_at = at + ".money." + f.key();
          if (!FieldOfKind(*type, f.key(), normalizers::FieldKind::kMoney)) {
            *error = field_at + ": " + it.key() + " has no money field named \"" + f.key() + "\"";
            return false;
          }
          MoneyRule rule;
          rule.field = f.key();
          if (!ParseMoneyRule(field_at, f.value(), *type, &rule, error)) return false;
          policy.money.push_back(std::move(rule));
        }
      } else if (m.key().empty() || m.key()[0] != '_') {
        *error = at + ": unknown member \"" + m.key() + "\" (expected pix_keys, money)";
        return false;
      }
    }
    parsed.push_back(std::move(policy));
  }
  *out = std::move(parsed);
  return true;
}

const ActionPolicy* FindPolicy(const std::vector<ActionPolicy>& policies,
                               std::string_view action_type) {
  for (const ActionPolicy& p : policies) {
    if (p.action_type == action_type) return &p;
  }
  return nullptr;
}

bool CheckPolicy(const ActionPolicy& policy, const normalizers::PayloadSource& payload,
                 const normalizers::Derivation& derivation, PolicyRefusal* refusal) {
  refusal->invalid_field = true;
  refusal->rule = "pix_keys";
  std::string* field = &refusal->field;
  std::string* message = &refusal->message;
  for (const PixKeyRule& rule : policy.pix_keys) {
    normalizers::FieldValue value;
    std::string text;
    if (!payload.Find(rule.field, &value)) continue;  // the derivation refuses it first
    if (value.type == normalizers::FieldValue::Type::kString) {
      text = value.text;
    } else if (value.type == normalizers::FieldValue::Type::kUnsigned) {
      text = std::to_string(value.unsigned_value);  // a CPF sent as a JSON integer
    } else {
      continue;  // the derivation refuses any other type first
    }
    normalizers::PixKeyReading reading;
    std::string reason;
    *field = rule.field;
    if (!normalizers::ReadPixKey(text, &reading, &reason)) {
      *message = rule.field + " is not a Pix key (" + reason + "); this action type accepts " +
                 TypeList(rule.types) + " keys (the config's policy)";
      return false;
    }
    const std::string read_as(normalizers::PixKeyTypeName(reading.type));
    if ((rule.types & Bit(reading.type)) == 0) {
      *message = rule.field + " reads as a " + read_as + " key, and this action type accepts " +
                 TypeList(rule.types) + " keys only (the config's policy); check the key";
      return false;
    }
    if (rule.phone_plus55 && reading.type == normalizers::PixKeyType::kPhone &&
        !reading.phone_written_as_plus55) {
      *message = rule.field +
                 " reads as a phone number without its +55 (or with another country code); this "
                 "action type takes phone keys written with +55 only (\"+55 11 91234-5678\"), so "
                 "that a mistyped CPF is never taken for a phone (the config's policy)";
      return false;
    }
  }
  refusal->invalid_field = false;
  refusal->rule = "max_per_action";
  for (const MoneyRule& rule : policy.money) {
    if (rule.max_per_action_cents == 0) continue;
    for (const auto& [name, value] : derivation.payload) {
      if (name != rule.field) continue;
      // The normalized value of a money field is its integer count of cents.
      int64_t cents = 0;
      const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), cents);
      if (ec != std::errc() || end != value.data() + value.size()) continue;
      if (cents > rule.max_per_action_cents) {
        *field = rule.field;
        *message = rule.field + " is " + Units(cents) +
                   ", above this action type's maximum per action of " +
                   Units(rule.max_per_action_cents) + " (policy rule max_per_action; allowance " +
                   Units(rule.max_per_action_cents) +
                   "); nothing was frozen: check the amount, or have the policy changed";
        return false;
      }
    }
  }
  return true;
}

namespace {

// The normalized value of `field` in a derivation; nullptr when absent.
const std::string* Normalized(const normalizers::Derivation& derivation, const std::string& field) {
  for (const auto& [name, value] : derivation.payload) {
    if (name == field) return &value;
  }
  return nullptr;
}

}  // namespace

void PolicyAllowances(const ActionPolicy& policy, const normalizers::Derivation& derivation,
                      std::vector<store::Allowance>* allowances) {
  allowances->clear();
  for (const MoneyRule& rule : policy.money) {
    if (!rule.per_day.any() && !rule.per_payer_per_day.any()) continue;
    const std::string* value = Normalized(derivation, rule.field);
    int64_t cents = 0;
    if (value == nullptr) continue;  // the derivation refuses a missing field first
    const auto [end, ec] = std::from_chars(value->data(), value->data() + value->size(), cents);
    if (ec != std::errc() || end != value->data() + value->size()) continue;
    const std::string name = policy.action_type + "/" + rule.field;
    if (rule.per_day.any()) {
      allowances->push_back({name, cents, rule.per_day.max_total_cents, rule.per_day.max_count});
    }
    if (rule.per_payer_per_day.any()) {
      const std::string* payer = Normalized(derivation, rule.payer_field);
      allowances->push_back({name + "/" + rule.payer_field + "=" + (payer ? *payer : ""), cents,
                             rule.per_payer_per_day.max_total_cents,
                             rule.per_payer_per_day.max_count});
    }
  }
}

std::string ApprovalReason(const ActionPolicy& policy, const normalizers::Derivation& derivation) {
  for (const MoneyRule& rule : policy.money) {
    if (rule.approval_above_cents == 0) continue;
    const std::string* value = Normalized(derivation, rule.field);
    int64_t cents = 0;
    if (value == nullptr) continue;
    const auto [end, ec] = std::from_chars(value->data(), value->data() + value->size(), cents);
    if (ec != std::errc() || end != value->data() + value->size()) continue;
    if (cents > rule.approval_above_cents) {
      return rule.field + " is " + Units(cents) +
             ", above this action type's approval threshold of " +
             Units(rule.approval_above_cents) +
             " (policy rule approval_above): an admin must approve it (intentd approve) before "
             "any attempt";
    }
  }
  return "";
}

PolicyRefusal AllowanceRefused(const ActionPolicy& policy, const store::Allowance& allowance,
                               const store::AllowanceRefusal& refusal) {
  PolicyRefusal out;
  // allowance.name is "TYPE/FIELD" or "TYPE/FIELD/PAYER=VALUE" (PolicyAllowances).
  std::string_view rest(allowance.name);
  rest.remove_prefix(std::min(rest.size(), policy.action_type.size() + 1));
  const size_t slash = rest.find('/');
  out.field = std::string(rest.substr(0, slash));
  std::string whose = "this tenant's " + policy.action_type + " intents";
  std::string rule = "per_day";
  if (slash != std::string_view::npos) {
    const std::string_view payer = rest.substr(slash + 1);
    const size_t eq = payer.find('=');
    whose = policy.action_type + " intents for " + std::string(payer.substr(0, eq)) + " " +
            std::string(payer.substr(eq == std::string_view::npos ? payer.size() : eq + 1));
    rule = "per_payer_per_day";
  }
  const std::string today = " frozen today (the calendar day in Brazil time, UTC-03:00)";
  if (allowance.max_count != 0 && refusal.count >= allowance.max_count) {
    out.rule = rule + ".max_count";
    out.message = out.field + ": " + whose + today + " are " + std::to_string(refusal.count) +
                  ", this policy's maximum (" + rule +
                  ".max_count); none remain today. Nothing was frozen: wait for tomorrow, or "
                  "have the policy changed";
    return out;
  }
  out.rule = rule + ".max_total";
  const int64_t remaining = std::max<int64_t>(0, allowance.max_total - refusal.total);
  out.message = out.field + " is " + Units(allowance.amount) + ", and " + whose + today +
                " total " + Units(refusal.total) + " of a " + Units(allowance.max_total) +
                " maximum (" + rule + ".max_total): " + Units(remaining) +
                " remain today. Nothing was frozen: check the amount, or have the policy changed";
  return out;
}

void AppendPixKeyTypes(const normalizers::ActionType& type, const json& frozen, int rules_version,
                       std::string* out) {
  out->push_back('{');
  bool first = true;
  for (const normalizers::FieldSpec& f : type.fields) {
    if (f.kind != normalizers::FieldKind::kPixKey) continue;
    if (!first) out->push_back(',');
    first = false;
    normalizers::AppendJsonString(f.name, out);
    out->push_back(':');
    normalizers::PixKeyType t;
    const auto it = frozen.is_object() ? frozen.find(f.name) : frozen.end();
    if (rules_version >= 2 && it != frozen.end() && it->is_string() &&
        normalizers::PixKeyTypeOfCanonical(it->get_ref<const std::string&>(), &t)) {
      normalizers::AppendJsonString(normalizers::PixKeyTypeName(t), out);
    } else {
      out->append("null");
    }
  }
  out->push_back('}');
}

}  // namespace intentd::agent
