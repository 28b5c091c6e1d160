// `serve --metrics-listen ADDR:PORT`: GET /metrics over HTTP on a loopback
// address, for a Prometheus server on the same host. Off by default. Under
// the packaged systemd unit (PrivateNetwork=yes, RestrictAddressFamilies=
// AF_UNIX) nobody else could reach it; use `intentd metrics` with
// node_exporter's textfile collector there.
//
// One I/O thread; at most a few connections at once, each closed after one
// response or 5 s without a complete request. Requests other than
// GET/HEAD /metrics get 404 or 405.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace intentd::agent {

// Parses "127.0.0.1:9464", "[::1]:9464" or "localhost:9464" (port 0: any
// free port). Refuses addresses that are not loopback, saying why.
bool ParseMetricsListen(const std::string& text, std::string* address, uint16_t* port,
                        std::string* error);

class MetricsHttpServer {
 public:
  // Binds and starts serving; `render` makes the body of each response and
  // is called on the server's thread. False with *error when the address is
  // refused or cannot be bound.
  static bool Start(const std::string& listen, std::function<std::string()> render,
                    std::unique_ptr<MetricsHttpServer>* server, std::string* error);
  // Stops: closes the listener and open connections, joins the thread.
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // "127.0.0.1:PORT" with the port actually bound.
  std::string endpoint() const;

  struct Impl;

 private:
  explicit MetricsHttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace intentd::agent
