#include "common/config.h"

#include <grp.h>
#include <pwd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace intentd::agent {
namespace {

using nlohmann::json;

bool ResolveUser(const json& v, uid_t* uid, std::string* error) {
  if (v.is_number_unsigned()) {
    *uid = v.get<uid_t>();
    return true;
  }
  if (v.is_string()) {
    std::string name = v.get<std::string>();
    struct passwd pw, *found = nullptr;
    char buf[16384];
    if (getpwnam_r(name.c_str(), &pw, buf, sizeof buf, &found) == 0 && found != nullptr) {
      *uid = pw.pw_uid;
      return true;
    }
    *error = "access rule: unknown user \"" + name + "\"";
    return false;
  }
  *error = "access rule: \"uid\"/\"user\" must be a non-negative integer or a user name";
  return false;
}

bool ResolveGroup(const json& v, gid_t* gid, std::string* error) {
  if (v.is_number_unsigned()) {
    *gid = v.get<gid_t>();
    return true;
  }
  if (v.is_string()) {
    std::string name = v.get<std::string>();
    struct group gr, *found = nullptr;
    char buf[16384];
    if (getgrnam_r(name.c_str(), &gr, buf, sizeof buf, &found) == 0 && found != nullptr) {
      *gid = gr.gr_gid;
      return true;
    }
    *error = "access rule: unknown group \"" + name + "\"";
    return false;
  }
  *error = "access rule: \"gid\"/\"group\" must be a non-negative integer or a group name";
  return false;
}

bool ParseAccess(const json& v, std::vector<AccessRule>* rules, std::string* error) {
  if (!v.is_array()) {
    *error = "\"access\" must be an array of rules";
    return false;
  }
  for (size_t i = 0; i < v.size(); ++i) {
    const json& r = v[i];
    const std::string where = "access[" + std::to_string(i) + "]";
    if (!r.is_object()) {
      *error = where + " must be an object";
      return false;
    }
    AccessRule rule;
    for (auto it = r.begin(); it != r.end(); ++it) {
      const std::string& k = it.key();
      if (k == "uid" || k == "user") {
        uid_t uid;
        if (!ResolveUser(it.value(), &uid, error)) return (*error = where + ": " + *error, false);
        rule.uid = uid;
      } else if (k == "gid" || k == "group") {
        gid_t gid;
        if (!ResolveGroup(it.value(), &gid, error)) return (*error = where + ": " + *error, false);
        rule.gid = gid;
      } else if (k == "tenants") {
        if (!it.value().is_array()) {
          *error = where + ".tenants must be an array of tenant names or \"*\"";
          return false;
        }
        for (const json& t : it.value()) {
          if (!t.is_string() || t.get<std::string>().empty()) {
            *error = where + ".tenants must hold non-empty strings";
            return false;
          }
          rule.tenants.push_back(t.get<std::string>());
        }
      } else if (k == "admin") {
        if (!it.value().is_boolean()) {
          *error = where + ".admin must be true or false";
          return false;
        }
        rule.admin = it.value().get<bool>();
      } else if (k.empty() || k[0] != '_') {
        *error = where + ": unknown member \"" + k +
                 "\" (expected uid, user, gid, group, tenants, admin)";
        return false;
      }
    }
    if (!rule.uid && !rule.gid) {
      *error = where + " names neither a user (uid/user) nor a group (gid/group)";
      return false;
    }
    rules->push_back(std::move(rule));
  }
  return true;
}

bool ParseSize(const json& v, const std::string& name, long long min, long long max, long long* out,
               std::string* error) {
  if (!v.is_number_integer() || v.get<long long>() < min || v.get<long long>() > max) {
    *error = "limits." + name + " must be an integer from " + std::to_string(min) + " to " +
             std::to_string(max);
    return false;
  }
  *out = v.get<long long>();
  return true;
}

bool ParseLimits(const json& v, Limits* limits, std::string* error) {
  if (!v.is_object()) {
    *error = "\"limits\" must be an object";
    return false;
  }
  for (auto it = v.begin(); it != v.end(); ++it) {
    long long n = 0;
    if (it.key() == "max_frame_bytes") {
      if (!ParseSize(it.value(), it.key(), 1024, 16 << 20, &n, error)) return false;
      limits->max_frame_bytes = static_cast<size_t>(n);
    } else if (it.key() == "max_connections") {
      if (!ParseSize(it.value(), it.key(), 1, 1 << 20, &n, error)) return false;
      limits->max_connections = static_cast<size_t>(n);
    } else if (it.key() == "line_timeout_ms") {
      if (!ParseSize(it.value(), it.key(), 10, 3600 * 1000, &n, error)) return false;
      limits->line_timeout_ms = n;
    } else if (it.key().empty() || it.key()[0] != '_') {
      *error = "limits: unknown member \"" + it.key() +
               "\" (expected max_frame_bytes, max_connections, line_timeout_ms)";
      return false;
    }
  }
  return true;
}

bool ParseMetrics(const json& v, MetricsConfig* metrics, std::string* error) {
  if (!v.is_object()) {
    *error = "\"metrics\" must be an object like {\"tenant_labels\": false}";
    return false;
  }
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (it.key() == "tenant_labels") {
      if (!it.value().is_boolean()) {
        *error = "metrics.tenant_labels must be true or false";
        return false;
      }
      metrics->tenant_labels = it.value().get<bool>();
    } else if (it.key().empty() || it.key()[0] != '_') {
      *error = "metrics: unknown member \"" + it.key() + "\" (expected tenant_labels)";
      return false;
    }
  }
  return true;
}

}  // namespace

bool ParseConfig(const std::string& text, Config* config, std::string* error) {
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false, /*ignore_comments=*/false);
  if (doc.is_discarded()) {
    *error = "the config is not valid JSON";
    return false;
  }
  if (!doc.is_object()) {
    *error = "the config must be a JSON object";
    return false;
  }
  Config parsed;
  const json* policy = nullptr;  // parsed last: it names the action types
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    const std::string& k = it.key();
    if (k == "action_types") {
      normalizers::Error e;
      if (!parsed.catalog.AddFromConfig(doc, &e)) {
        *error = e.message;
        return false;
      }
    } else if (k == "access") {
      if (!ParseAccess(it.value(), &parsed.access, error)) return false;
    } else if (k == "limits") {
      if (!ParseLimits(it.value(), &parsed.limits, error)) return false;
    } else if (k == "metrics") {
      if (!ParseMetrics(it.value(), &parsed.metrics, error)) return false;
    } else if (k == "reconcile") {
      if (!reconcile::ParseReconcileConfig(it.value(), &parsed.reconcile, error)) return false;
    } else if (k == "anchors") {
      if (!it.value().is_string() || (it.value() != "strict" && it.value() != "lenient")) {
        *error =
            "\"anchors\" must be \"strict\" (refuse intent_refs that look drawn inside "
            "the attempt: uuids, message ids, timestamps) or \"lenient\" (the default)";
        return false;
      }
      parsed.strict_anchors = it.value() == "strict";
    } else if (k == "policy") {
      policy = &it.value();
    } else if (k == "socket_group") {
      if (!it.value().is_string()) {
        *error = "\"socket_group\" must be a group name";
        return false;
      }
      parsed.socket_group = it.value().get<std::string>();
    } else if (k.empty() || k[0] != '_') {
      *error = "unknown config member \"" + k +
               "\" (expected action_types, access, limits, socket_group, metrics, reconcile, "
               "anchors, policy)";
      return false;
    }
  }
  if (policy != nullptr && !ParsePolicy(*policy, parsed.catalog, &parsed.policy, error)) {
    return false;
  }
  *config = std::move(parsed);
  return true;
}

bool LoadConfigFile(const std::string& path, bool optional, Config* config, std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (optional && errno == ENOENT) return true;
    *error = "cannot read the config file " + path + ": " + std::strerror(errno);
    return false;
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (!ParseConfig(text.str(), config, error)) {
    *error = path + ": " + *error;
    return false;
  }
  return true;
}

}  // namespace intentd::agent
