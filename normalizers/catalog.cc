// Field kinds and the catalog of action types.
#include <array>
#include <nlohmann/json.hpp>

#include "normalizers/key_derivation.h"

namespace intentd::normalizers {
namespace {

struct KindName {
  FieldKind kind;
  std::string_view name;
};

constexpr std::array<KindName, 5> kKindNames = {{
    {FieldKind::kText, "text"},
    {FieldKind::kTrim, "trim"},
    {FieldKind::kLowerTrim, "lower-trim"},
    {FieldKind::kMoney, "money"},
    {FieldKind::kPixKey, "pix-key"},
}};

bool ConfigError(const std::string& type, const std::string& field, std::string message,
                 Error* error) {
  *error =
      Error{"invalid_config", field,
            "action type \"" + type + "\"" + (field.empty() ? "" : ", field \"" + field + "\"") +
                ": " + std::move(message)};
  return false;
}

const FieldSpec* FindField(const ActionType& type, const std::string& name) {
  for (const FieldSpec& field : type.fields) {
    if (field.name == name) return &field;
  }
  return nullptr;
}

// The key depends on the set of (name, kind), not on the listed order, so a
// redefinition differs only by a field added, dropped or of another kind.
// Returns false and names that field when the definitions differ.
bool SameFields(const ActionType& existing, const ActionType& redefined, std::string* field,
                std::string* message) {
  for (const FieldSpec& f : redefined.fields) {
    const FieldSpec* old = FindField(existing, f.name);
    if (old == nullptr) {
      *field = f.name;
      *message = "is not a field of the existing definition";
      return false;
    }
    if (old->kind != f.kind) {
      *field = f.name;
      *message = "has kind \"" + std::string(FieldKindName(old->kind)) +
                 "\" in the existing definition, not \"" + std::string(FieldKindName(f.kind)) +
                 "\"";
      return false;
    }
  }
  for (const FieldSpec& f : existing.fields) {
    if (FindField(redefined, f.name) == nullptr) {
      *field = f.name;
      *message = "is a field of the existing definition but is missing here";
      return false;
    }
  }
  return true;
}

std::string KindList() {
  std::string list;
  for (const KindName& k : kKindNames) {
    if (!list.empty()) list.append(", ");
    list.append("\"").append(k.name).append("\"");
  }
  return list;
}

// Parses one action type definition {"fields": [{"name": ..., "kind": ...}]}.
bool ParseActionType(const std::string& name, const nlohmann::json& definition, ActionType* out,
                     Error* error) {
  if (name.empty()) return ConfigError(name, "", "an action type name is not empty", error);
  if (!definition.is_object()) {
    return ConfigError(name, "", "the definition must be an object {\"fields\": [...]}", error);
  }
  const auto fields = definition.find("fields");
  if (fields == definition.end() || !fields->is_array()) {
    return ConfigError(name, "", "\"fields\" must be an array of {\"name\", \"kind\"}", error);
  }
  if (fields->empty())
    return ConfigError(name, "", "\"fields\" must list at least one field", error);
  out->name = name;
  out->fields.clear();
  for (const nlohmann::json& field : *fields) {
    if (!field.is_object()) {
      return ConfigError(name, "", "each field must be an object {\"name\", \"kind\"}", error);
    }
    const auto field_name = field.find("name");
    if (field_name == field.end() || !field_name->is_string() ||
        field_name->get_ref<const std::string&>().empty()) {
      return ConfigError(name, "", "each field needs a non-empty string \"name\"", error);
    }
    const std::string& fname = field_name->get_ref<const std::string&>();
    for (const FieldSpec& seen : out->fields) {
      if (seen.name == fname) return ConfigError(name, fname, "the field is listed twice", error);
    }
    const auto kind_name = field.find("kind");
    FieldKind kind;
    if (kind_name == field.end() || !kind_name->is_string() ||
        !ParseFieldKind(kind_name->get_ref<const std::string&>(), &kind)) {
      return ConfigError(name, fname,
                         (kind_name == field.end() ? std::string("missing \"kind\"")
                                                   : "unknown kind " + kind_name->dump()) +
                             "; use one of " + KindList(),
                         error);
    }
    out->fields.push_back(FieldSpec{fname, kind});
  }
  return true;
}

}  // namespace

bool ParseFieldKind(std::string_view name, FieldKind* out) {
  for (const KindName& k : kKindNames) {
    if (k.name == name) {
      *out = k.kind;
      return true;
    }
  }
  return false;
}

std::string_view FieldKindName(FieldKind kind) {
  for (const KindName& k : kKindNames) {
    if (k.kind == kind) return k.name;
  }
  return "unknown";
}

Catalog Catalog::Builtins() {
  Catalog catalog;
  catalog.types_.push_back(ActionType{"pix.cobranca",
                                      {{"cliente_id", FieldKind::kText},
                                       {"valor", FieldKind::kMoney},
                                       {"chave_pix_destino", FieldKind::kPixKey},
                                       {"referencia_intencao", FieldKind::kTrim}}});
  catalog.types_.push_back(ActionType{"email.cobranca",
                                      {{"cliente_id", FieldKind::kText},
                                       {"referencia_intencao", FieldKind::kTrim},
                                       {"template", FieldKind::kLowerTrim}}});
  return catalog;
}

bool Catalog::AddFromConfig(const nlohmann::json& config, Error* error) {
  if (!config.is_object()) {
    *error = Error{"invalid_config", "", "the configuration must be a JSON object"};
    return false;
  }
  const auto types = config.find("action_types");
  if (types == config.end()) return true;
  if (!types->is_object()) {
    *error = Error{"invalid_config", "",
                   "\"action_types\" must be an object of {\"NAME\": {\"fields\": [...]}}"};
    return false;
  }
  // Parse everything first so that an error leaves *this unchanged.
  std::vector<ActionType> added;
  for (const auto& [name, definition] : types->items()) {
    ActionType type;
    if (!ParseActionType(name, definition, &type, error)) return false;
    if (const ActionType* existing = Find(name)) {
      std::string field;
      std::string why;
      if (!SameFields(*existing, type, &field, &why)) {
        return ConfigError(name, field,
                           why +
                               "; an existing action type cannot be redefined differently, "
                               "use a new action type name",
                           error);
      }
      continue;  // an identical redefinition changes nothing
    }
    added.push_back(std::move(type));
  }
  for (ActionType& type : added) types_.push_back(std::move(type));
  return true;
}

const ActionType* Catalog::Find(std::string_view name) const {
  for (const ActionType& type : types_) {
    if (type.name == name) return &type;
  }
  return nullptr;
}

}  // namespace intentd::normalizers
