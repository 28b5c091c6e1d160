// `intentd migrate --store postgresql://...`: creates or upgrades the
// PostgreSQL schema that `intentd serve --store postgresql://...` needs.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "common/flags.h"
#include "store/open_store.h"

namespace intentd::cli {

using agent::Flags;
using agent::FlagSpec;
using agent::FlagsUsage;

namespace {

const std::vector<FlagSpec> kMigrateFlags = {
    {"store", true,
     "the PostgreSQL database: a libpq URI, e.g. postgresql://intentd@db.internal/intentd or "
     "postgresql:///intentd?host=/run/postgresql (required)"},
    {"json", false, "print the result as one JSON object: store, kind, from_version, to_version"},
};

constexpr char kMigrateSummary[] =
    "Creates the intentd schema in a PostgreSQL database, or upgrades it to this intentd's\n"
    "version (tables intencao, acao_idempotente and intentd_schema_version, in the first\n"
    "schema of the connection's search_path; choose one with ?options=-csearch_path%3DNAME).\n"
    "Idempotent: running it again changes nothing; concurrent runs wait for each other.\n"
    "Run it once before starting agents with --store postgresql://..., and again after\n"
    "upgrading intentd (agents refuse to run on an older or newer schema). The role needs\n"
    "CREATE on that schema; the agents then need SELECT, INSERT, UPDATE and DELETE.\n"
    "RocksDB stores (rocksdb:DIR) need no migration: they are upgraded when opened.";

int Usage(const std::string& message) {
  std::fprintf(stderr, "intentd migrate: %s\n", message.c_str());
  return kExitUsage;
}

}  // namespace

int RunMigrate(const std::vector<std::string>& args) {
  Flags flags;
  std::string error;
  if (!flags.Parse(kMigrateFlags, args, &error)) return Usage(error);
  if (flags.help_requested()) {
    std::fputs(
        FlagsUsage("migrate", "--store postgresql://...", kMigrateSummary, kMigrateFlags).c_str(),
        stdout);
    return kExitOk;
  }
  if (!flags.positional().empty()) return Usage("unexpected argument " + flags.positional()[0]);
  auto url = flags.Get("store");
  if (!url) return Usage("--store is required (e.g. --store postgresql://intentd@db/intentd)");

  store::StoreSpec spec;
  spec.url = *url;
  store::StoreKind kind;
  std::string rocks_dir;
  store::Status st = store::ResolveStore(spec, &kind, &rocks_dir);
  if (!st.ok()) return Usage(st.message());
  const std::string shown = store::DescribeStore(spec);
  const bool as_json = flags.Has("json");
  if (kind == store::StoreKind::kRocksDb) {
    if (as_json) {
      std::printf("%s\n", nlohmann::json{{"store", shown}, {"kind", "rocksdb"}, {"migrated", false}}
                              .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                              .c_str());
      return kExitOk;
    }
    std::printf("%s: RocksDB stores need no migration (upgraded when the agent opens them)\n",
                shown.c_str());
    return kExitOk;
  }
  store::MigrateResult result;
  st = store::MigrateStore(spec, &result);
  if (!st.ok()) {
    std::fprintf(stderr, "intentd migrate: %s: %s\n", shown.c_str(), st.message().c_str());
    return kExitFailed;
  }
  if (as_json) {
    std::printf("%s\n", nlohmann::json{{"store", shown},
                                       {"kind", "postgresql"},
                                       {"from_version", result.from_version},
                                       {"to_version", result.to_version},
                                       {"migrated", result.from_version != result.to_version}}
                            .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                            .c_str());
  } else if (result.from_version == result.to_version) {
    std::printf("%s: the intentd schema is at version %d already; nothing to do\n", shown.c_str(),
                result.to_version);
  } else if (result.from_version == 0) {
    std::printf("%s: created the intentd schema, version %d\n", shown.c_str(), result.to_version);
  } else {
    std::printf("%s: migrated the intentd schema from version %d to %d\n", shown.c_str(),
                result.from_version, result.to_version);
  }
  return kExitOk;
}

}  // namespace intentd::cli
