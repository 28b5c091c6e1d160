// Helpers shared by the store tests: temporary directories, store opening,
// request builders.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "store/clock.h"
#include "store/rocks/rocks_store.h"
#include "store/store.h"

namespace intentd::store::testing {

// A fresh directory under $TMPDIR, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string Sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline constexpr int64_t kT0 = 1'800'000'000'000;  // an arbitrary "now"
inline constexpr int64_t kLeaseMs = 300'000;
inline constexpr int64_t kDay = 24LL * 3600 * 1000;

RocksOptions TestOptions(const std::string& path, const Clock* clock);

// A request that freezes (tenant, ref, type) with `key` if absent.
IntentCandidate NewIntentRequest(const std::string& tenant, const std::string& ref,
                                 const std::string& key, const std::string& type = "pix.cobranca");
// A request from a caller that read the intent with `key`.
IntentCandidate ExistingIntentRequest(const std::string& tenant, const std::string& ref,
                                      const std::string& key,
                                      const std::string& type = "pix.cobranca");

// Begin with `request` and expect the call to succeed (gtest failure if not).
BeginResult BeginExpectingOk(Store* store, const IntentCandidate& request);

// What the agent does: one begin with its own candidate (`my_key`), which
// the store writes when the intent is absent and ignores otherwise.
Status AgentBegin(Store* store, const std::string& tenant, const std::string& ref,
                  const std::string& my_key, BeginResult* result, int64_t lease_ms = kLeaseMs);

// A deterministic 64-hex-digit key for n.
std::string KeyFor(uint64_t n);

// Every file under `dir` (recursively) with its bytes, as one comparable text.
std::string DirectoryFingerprint(const std::string& dir);

}  // namespace intentd::store::testing
