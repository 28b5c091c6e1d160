// The agent's configuration file (JSON): action types, access rules, limits.
//
//   {"action_types": {...},            // see normalizers::Catalog::AddFromConfig
//    "access": [{"uid": 1001 | "user": "bot", "gid": 1001 | "group": "bots",
//                "tenants": ["acme", "*"], "admin": false}, ...],
//    "limits": {"max_frame_bytes": 65536, "max_connections": 1024,
//               "line_timeout_ms": 10000},
//    "socket_group": "intentd",
//    "metrics": {"tenant_labels": false},
//    "anchors": "lenient" | "strict",
//    "policy": {...},                  // see common/policy.h
//    "reconcile": {...}}               // see reconcile/config.h
// Members whose name starts with "_" are comments. Anything else is an error.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "common/policy.h"
#include "normalizers/key_derivation.h"
#include "reconcile/config.h"

namespace intentd::agent {

struct AccessRule {
  std::optional<uid_t> uid;  // a rule names a uid or a gid (or both: either matches)
  std::optional<gid_t> gid;
  std::vector<std::string> tenants;  // exact names, or "*" for every tenant
  bool admin = false;                // amend, and uncertain across tenants
};

struct Limits {
  size_t max_frame_bytes = 65536;
  size_t max_connections = 1024;
  long long line_timeout_ms = 10000;
};

struct MetricsConfig {
  // Per-tenant series (begin decisions, uncertain actions) in the metrics.
  // Off by default: tenant ids are business names, and every tenant is a
  // series. Shown to admins only.
  bool tenant_labels = false;
};

struct Config {
  normalizers::Catalog catalog = normalizers::Catalog::Builtins();
  std::vector<AccessRule> access;  // empty: the socket's permissions are the boundary
  Limits limits;
  std::string socket_group;
  MetricsConfig metrics;
  // Per action type, the provider `intentd reconcile` and `serve
  // --reconcile-every` ask about uncertain actions (empty: none).
  std::vector<reconcile::TypeSettings> reconcile;
  // "anchors": "strict": freeze, begin and amend of an action type with a
  // money field refuse an intent_ref that looks drawn inside the attempt (a
  // uuid, a WhatsApp message id, a timestamp: protocol/anchor.h), which would
  // freeze a new intent at every redelivery. Off by default.
  bool strict_anchors = false;
  // Rules a new intent's payload must meet, per action type (common/policy.h).
  std::vector<ActionPolicy> policy;
};

// Parses a config document. Errors name the member at fault.
bool ParseConfig(const std::string& text, Config* config, std::string* error);

// Reads and parses `path`. A missing file is an error unless `optional`
// (then *config keeps the defaults: the built-in action types, no rules).
bool LoadConfigFile(const std::string& path, bool optional, Config* config, std::string* error);

}  // namespace intentd::agent
