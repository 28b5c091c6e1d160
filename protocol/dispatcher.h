// The protocol: one request line in, one response line out
// (docs/protocol.md). The Dispatcher validates arguments, derives
// keys, checks access, and calls the store; every store operation is one
// atomic step there. It is the transport's Handler.
//
// Thread safety: HandleLine may be called from many threads at once.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "common/binary.h"
#include "common/config.h"
#include "common/keyring.h"
#include "normalizers/key_derivation.h"
#include "protocol/protocol.h"
#include "protocol/stats.h"
#include "store/clock.h"
#include "store/store.h"
#include "transport/server.h"

namespace intentd::agent {

// Logs a store failure that no op returned (a durability ticket that
// failed after the reply was made), at most one line a second per kind of
// failure, as FromStore does for the ones ops return.
void LogStoreFailure(const store::Status& status);

// The store's optional features (its size, backups, group commit, disk
// space and health: store/admin.h) are asked of the store itself.
struct DispatcherOptions {
  int rules_version = 2;                // for new intents and amend
  const store::Clock* clock = nullptr;  // nullptr: the system clock
  // The store answers without blocking on the disk or the network (RocksDB,
  // with deferred sync or none): protocol ops may run on the transport's io
  // thread, where the request was parsed; the slow ops (OpSpec::slow) never do.
  bool quick_store = false;
};

class Dispatcher : public transport::Handler {
 public:
  // Borrows everything; all must outlive the Dispatcher.
  Dispatcher(const Config& config, const Keyring& keyring, store::Store* store,
             const DispatcherOptions& options);
  // A keyring of the one secret `deriver` derives with, id "0".
  Dispatcher(const Config& config, const normalizers::KeyDeriver& deriver, store::Store* store,
             const DispatcherOptions& options);
  ~Dispatcher() override;
  Dispatcher(const Dispatcher&) = delete;
  Dispatcher& operator=(const Dispatcher&) = delete;

  std::string HandleLine(const transport::PeerCredentials& peer, std::string_view line) override;
  // Parses the line and routes it by its op (OpSpec::slow): answered here,
  // with the store's durability ticket (Store::DurabilityTicket) and the
  // storage_error line to send if that ticket is lost, or deferred to a
  // worker.
  transport::Reply Handle(const transport::PeerCredentials& peer, std::string_view line) override;
  std::string TransportErrorLine(transport::TransportError error) override;
  void OnConnectionOpened() override;
  void OnConnectionClosed() override;

  const Stats& stats() const;
  Stats& mutable_stats();

  // A request line from inside the agent (its reconciler), with every right
  // whatever the access rules: answered once durable, like HandleLine.
  std::string HandleTrusted(std::string_view line);

  // The metrics in the Prometheus text format, for the HTTP endpoint: what
  // the `metrics` op returns to any connection (no per-tenant series: an
  // HTTP scrape has no peer the access rules could judge). Never carries
  // payloads or keys.
  std::string MetricsText();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace intentd::agent
