// The PostgreSQL of a test run (scripts/with-postgres.sh exports its URI as
// INTENTD_TEST_POSTGRES): each test works in a schema of its own.
#pragma once

#include <string>

namespace intentd::store::testing {

inline constexpr char kNoPostgres[] =
    "INTENTD_TEST_POSTGRES is unset: run the tests under scripts/with-postgres.sh (it starts a "
    "private PostgreSQL 15) to include the PostgreSQL backend";

// The database's libpq URI, or "" when the run has no PostgreSQL.
std::string TestPostgresUrl();

// `url` with one more query parameter (name=value; value percent-encoded).
std::string WithUrlParam(const std::string& url, const std::string& name, const std::string& value);

// A fresh schema in the test database, dropped (with everything in it) on
// destruction. url() connects with it first on the search_path.
class PostgresSchema {
 public:
  // migrate: run MigratePostgres on it (else it is empty).
  explicit PostgresSchema(bool migrate = true);
  ~PostgresSchema();
  PostgresSchema(const PostgresSchema&) = delete;
  PostgresSchema& operator=(const PostgresSchema&) = delete;

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  const std::string& name() const { return name_; }
  const std::string& url() const { return url_; }

 private:
  std::string name_;
  std::string url_;
  std::string error_;
};

}  // namespace intentd::store::testing
