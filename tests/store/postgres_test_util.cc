#include "tests/store/postgres_test_util.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "store/postgres/postgres_store.h"

namespace intentd::store::testing {

std::string TestPostgresUrl() {
  const char* url = std::getenv("INTENTD_TEST_POSTGRES");
  return url != nullptr ? url : "";
}

std::string WithUrlParam(const std::string& url, const std::string& name,
                         const std::string& value) {
  std::string encoded;
  for (unsigned char ch : value) {
    if (std::isalnum(ch) || ch == '-' || ch == '_' || ch == '.') {
      encoded += static_cast<char>(ch);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", ch);
      encoded += buf;
    }
  }
  return url + (url.find('?') == std::string::npos ? "?" : "&") + name + "=" + encoded;
}

PostgresSchema::PostgresSchema(bool migrate) {
  static std::atomic<int> counter{0};
  std::random_device rd;
  char buf[64];
  std::snprintf(buf, sizeof buf, "t_%d_%d_%08x", static_cast<int>(getpid()), counter++, rd());
  name_ = buf;
  const std::string base = TestPostgresUrl();
  if (base.empty()) {
    error_ = kNoPostgres;
    return;
  }
  url_ = WithUrlParam(base, "options", "-csearch_path=" + name_);
  Status s = PostgresExecute(base, "CREATE SCHEMA " + name_);
  if (!s.ok()) {
    error_ = "creating schema " + name_ + ": " + s.message();
    return;
  }
  if (migrate) {
    MigrateResult result;
    s = MigratePostgres(url_, &result);
    if (!s.ok()) error_ = "migrating schema " + name_ + ": " + s.message();
  }
}

PostgresSchema::~PostgresSchema() {
  const std::string base = TestPostgresUrl();
  if (!base.empty()) PostgresExecute(base, "DROP SCHEMA IF EXISTS " + name_ + " CASCADE");
}

}  // namespace intentd::store::testing
