#include "tests/store/store_test_util.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

namespace intentd::store::testing {

TempDir::TempDir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern =
      std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/intentd-store-test-XXXXXX";
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  if (mkdtemp(buf.data()) == nullptr) std::abort();
  path_ = buf.data();
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

RocksOptions TestOptions(const std::string& path, const Clock* clock) {
  RocksOptions o;
  o.path = path;
  o.sync = false;  // unit tests; durability has its own tests
  o.clock = clock;
  o.retention_ms = 30 * kDay;
  o.block_cache_bytes = 8 << 20;
  return o;
}

IntentCandidate NewIntentRequest(const std::string& tenant, const std::string& ref,
                                 const std::string& key, const std::string& type) {
  IntentCandidate r;
  r.tenant_id = tenant;
  r.intent_ref = ref;
  r.action_type = type;
  Intent c;
  c.payload = "{\"ref\":\"" + ref + "\",\"valor\":\"18000\"}";
  c.key = key;
  c.rules_version = 2;
  r.candidate = c;
  return r;
}

IntentCandidate ExistingIntentRequest(const std::string& tenant, const std::string& ref,
                                      const std::string& key, const std::string& type) {
  IntentCandidate r;
  r.tenant_id = tenant;
  r.intent_ref = ref;
  r.action_type = type;
  r.expected_key = key;
  return r;
}

BeginResult BeginExpectingOk(Store* store, const IntentCandidate& request) {
  BeginResult r;
  Status s = store->Begin(request, kLeaseMs, &r);
  EXPECT_TRUE(s.ok()) << s.message();
  return r;
}

Status AgentBegin(Store* store, const std::string& tenant, const std::string& ref,
                  const std::string& my_key, BeginResult* result, int64_t lease_ms) {
  // As the agent does: one call, acting on the intent as frozen if present.
  return store->Begin(NewIntentRequest(tenant, ref, my_key), lease_ms, result);
}

std::string KeyFor(uint64_t n) {
  char buf[65];
  // Two mixed 64-bit words, repeated: distinct for distinct n, hex like a real key.
  uint64_t a = n * 0x9E3779B97F4A7C15ULL + 1, b = a ^ (a >> 29) ^ 0xBF58476D1CE4E5B9ULL;
  std::snprintf(buf, sizeof buf, "%016llx%016llx%016llx%016llx", static_cast<unsigned long long>(a),
                static_cast<unsigned long long>(b), static_cast<unsigned long long>(n),
                static_cast<unsigned long long>(~a));
  return buf;
}

std::string DirectoryFingerprint(const std::string& dir) {
  std::vector<std::string> entries;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    std::ostringstream line;
    line << e.path().string();
    if (e.is_regular_file()) {
      std::ifstream in(e.path(), std::ios::binary);
      line << " " << std::string(std::istreambuf_iterator<char>(in), {});
    }
    entries.push_back(line.str());
  }
  std::sort(entries.begin(), entries.end());
  std::string out;
  for (const auto& e : entries) out += e + "\n";
  return out;
}

}  // namespace intentd::store::testing
