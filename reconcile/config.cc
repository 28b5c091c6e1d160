#include "reconcile/config.h"

#include <nlohmann/json.hpp>

namespace intentd::reconcile {
namespace {

using nlohmann::json;

constexpr int64_t kMinTimeoutMs = 1;
constexpr int64_t kMaxTimeoutMs = 600000;

bool IsComment(const std::string& key) { return !key.empty() && key[0] == '_'; }

bool ParseTimeout(const json& v, const std::string& where, int64_t* out, std::string* error) {
  if (!v.is_number_integer() || v.get<int64_t>() < kMinTimeoutMs ||
      v.get<int64_t>() > kMaxTimeoutMs) {
    *error = where + ".timeout_ms must be an integer from " + std::to_string(kMinTimeoutMs) +
             " to " + std::to_string(kMaxTimeoutMs);
    return false;
  }
  *out = v.get<int64_t>();
  return true;
}

bool ParseString(const json& v, const std::string& where, const std::string& name, std::string* out,
                 std::string* error) {
  if (!v.is_string() || v.get<std::string>().empty()) {
    *error = where + "." + name + " must be a non-empty string";
    return false;
  }
  *out = v.get<std::string>();
  if (out->find('\0') != std::string::npos) {
    *error = where + "." + name + " must not hold a NUL character";
    return false;
  }
  return true;
}

// An absolute http(s) URL as curl will take it: no credentials in it (they
// would end up in logs and error messages), no whitespace or control
// characters, no fragment; `base` URLs also no query (paths are appended).
bool CheckUrl(const std::string& url, const std::string& where, const std::string& name, bool base,
              std::string* error) {
  size_t scheme_end = 0;
  if (url.rfind("https://", 0) == 0) {
    scheme_end = 8;
  } else if (url.rfind("http://", 0) == 0) {
    scheme_end = 7;
  } else {
    *error = where + "." + name + " must start with https:// or http://";
    return false;
  }
  for (unsigned char c : url) {
    if (c <= 0x20 || c == 0x7f) {
      *error = where + "." + name + " must not hold spaces or control characters";
      return false;
    }
  }
  const size_t authority_end = url.find_first_of("/?#", scheme_end);
  const std::string authority = url.substr(scheme_end, authority_end - scheme_end);
  if (authority.empty()) {
    *error = where + "." + name + " has no host";
    return false;
  }
  if (authority.find('@') != std::string::npos) {
    *error = where + "." + name +
             " must not carry credentials (user:password@); the client secret goes in "
             "client_secret_file";
    return false;
  }
  if (url.find('#') != std::string::npos) {
    *error = where + "." + name + " must not hold a fragment (#)";
    return false;
  }
  if (base && url.find('?') != std::string::npos) {
    *error = where + "." + name + " must not hold a query (?): /cob/{txid} is appended to it";
    return false;
  }
  return true;
}

bool ParsePixApi(const json& v, const std::string& where, PixApiSettings* pix, std::string* error) {
  if (!v.is_object()) {
    *error = where + " must be an object";
    return false;
  }
  struct Field {
    const char* name;
    std::string* out;
    bool required;
  };
  const Field fields[] = {
      {"base_url", &pix->base_url, true},    {"token_url", &pix->token_url, true},
      {"client_id", &pix->client_id, true},  {"client_secret_file", &pix->client_secret_file, true},
      {"cert_file", &pix->cert_file, false}, {"key_file", &pix->key_file, false},
      {"ca_file", &pix->ca_file, false},     {"scope", &pix->scope, false},
  };
  for (auto it = v.begin(); it != v.end(); ++it) {
    const std::string& k = it.key();
    if (k == "timeout_ms") {
      if (!ParseTimeout(it.value(), where, &pix->timeout_ms, error)) return false;
      continue;
    }
    const Field* field = nullptr;
    for (const Field& f : fields) {
      if (k == f.name) field = &f;
    }
    if (field != nullptr) {
      if (!ParseString(it.value(), where, k, field->out, error)) return false;
    } else if (!IsComment(k)) {
      *error = where + ": unknown member \"" + k +
               "\" (expected base_url, token_url, client_id, client_secret_file, cert_file, "
               "key_file, ca_file, scope, timeout_ms)";
      return false;
    }
  }
  for (const Field& f : fields) {
    if (f.required && f.out->empty()) {
      *error = where + ": missing " + f.name;
      return false;
    }
  }
  while (pix->base_url.size() > 1 && pix->base_url.back() == '/') pix->base_url.pop_back();
  if (!CheckUrl(pix->base_url, where, "base_url", true, error) ||
      !CheckUrl(pix->token_url, where, "token_url", false, error)) {
    return false;
  }
  if (pix->client_id.find(':') != std::string::npos) {
    *error = where + ".client_id must not hold \":\" (HTTP Basic authentication cannot carry it)";
    return false;
  }
  for (unsigned char c : pix->scope) {
    if (c < 0x20 || c == 0x7f) {
      *error = where + ".scope must not hold control characters";
      return false;
    }
  }
  const bool tls = pix->base_url.rfind("https://", 0) == 0;
  if (tls != (pix->token_url.rfind("https://", 0) == 0)) {
    *error = where +
             ": base_url and token_url must both be https:// or both http:// (the token request "
             "carries the client secret)";
    return false;
  }
  if (tls) {
    if (pix->cert_file.empty() || pix->key_file.empty()) {
      *error = where + ": missing " +
               std::string(pix->cert_file.empty() ? "cert_file" : "key_file") +
               " (the API Pix requires a client certificate: cert_file and key_file)";
      return false;
    }
  } else if (!pix->cert_file.empty() || !pix->key_file.empty() || !pix->ca_file.empty()) {
    *error = where +
             ": cert_file, key_file and ca_file have no use with http:// URLs (use https:// "
             "for mutual TLS)";
    return false;
  }
  return true;
}

bool ParseArgv(const json& v, const std::string& where, std::vector<std::string>* argv,
               std::string* error) {
  if (!v.is_array() || v.empty()) {
    *error =
        where + ".command must be a non-empty array of strings (the program, then its arguments)";
    return false;
  }
  for (const json& a : v) {
    if (!a.is_string() || a.get<std::string>().find('\0') != std::string::npos) {
      *error = where + ".command must hold only strings, without NUL characters";
      return false;
    }
    argv->push_back(a.get<std::string>());
  }
  if ((*argv)[0].empty() || (*argv)[0][0] != '/') {
    *error = where + ".command[0] must be an absolute path (no search of $PATH)";
    return false;
  }
  return true;
}

bool ParseType(const std::string& action_type, const json& v, TypeSettings* type,
               std::string* error) {
  const std::string where = "reconcile." + action_type;
  if (!v.is_object()) {
    *error = where + " must be an object with pix_api or command";
    return false;
  }
  type->action_type = action_type;
  std::optional<int64_t> timeout_ms;
  for (auto it = v.begin(); it != v.end(); ++it) {
    const std::string& k = it.key();
    if (k == "pix_api") {
      PixApiSettings pix;
      if (!ParsePixApi(it.value(), where + ".pix_api", &pix, error)) return false;
      type->pix_api = std::move(pix);
    } else if (k == "command") {
      CommandSettings command;
      if (!ParseArgv(it.value(), where, &command.argv, error)) return false;
      type->command = std::move(command);
    } else if (k == "timeout_ms") {
      int64_t ms = 0;
      if (!ParseTimeout(it.value(), where, &ms, error)) return false;
      timeout_ms = ms;
    } else if (!IsComment(k)) {
      *error =
          where + ": unknown member \"" + k + "\" (expected pix_api, or command and timeout_ms)";
      return false;
    }
  }
  if (type->pix_api.has_value() == type->command.has_value()) {
    *error = where + (type->pix_api ? ": has both pix_api and command; keep one"
                                    : ": names no provider (pix_api or command)");
    return false;
  }
  if (timeout_ms) {
    if (type->pix_api) {
      *error = where + ".timeout_ms goes with command; for pix_api, put timeout_ms inside pix_api";
      return false;
    }
    type->command->timeout_ms = *timeout_ms;
  }
  return true;
}

}  // namespace

bool ParseReconcileConfig(const json& member, std::vector<TypeSettings>* out, std::string* error) {
  if (!member.is_object()) {
    *error = "\"reconcile\" must be an object keyed by action type";
    return false;
  }
  std::vector<TypeSettings> types;
  for (auto it = member.begin(); it != member.end(); ++it) {
    if (IsComment(it.key())) continue;
    if (it.key().empty()) {
      *error = "reconcile: an action type must not be empty";
      return false;
    }
    TypeSettings type;
    if (!ParseType(it.key(), it.value(), &type, error)) return false;
    types.push_back(std::move(type));
  }
  for (auto& t : types) out->push_back(std::move(t));
  return true;
}

}  // namespace intentd::reconcile
