#include "agent/metrics_http.h"

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <thread>

#include "common/log.h"
#include "common/prometheus.h"

namespace intentd::agent {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

constexpr auto kRequestTimeout = std::chrono::seconds(5);
constexpr int kMaxSessions = 8;
constexpr size_t kMaxRequestBytes = 8192;

}  // namespace

bool ParseMetricsListen(const std::string& text, std::string* address, uint16_t* port,
                        std::string* error) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon + 1 == text.size()) {
    *error = "--metrics-listen must be ADDRESS:PORT, e.g. 127.0.0.1:9464";
    return false;
  }
  std::string host = text.substr(0, colon);
  const std::string port_text = text.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host == "localhost") host = "127.0.0.1";
  unsigned long n = 0;
  if (port_text.size() > 5 || port_text.find_first_not_of("0123456789") != std::string::npos ||
      (n = std::stoul(port_text)) > 65535) {
    *error = "--metrics-listen: the port must be a number from 0 to 65535";
    return false;
  }
  boost::system::error_code ec;
  const asio::ip::address ip = asio::ip::make_address(host, ec);
  if (ec) {
    *error = "--metrics-listen: \"" + host + "\" is not an IP address (use 127.0.0.1 or [::1])";
    return false;
  }
  if (!ip.is_loopback()) {
    *error = "--metrics-listen: " + host +
             " is not a loopback address; metrics are served on 127.0.0.1 or ::1 only (scrape "
             "through a local proxy, or use `intentd metrics` with node_exporter's textfile "
             "collector)";
    return false;
  }
  *address = ip.to_string();
  *port = static_cast<uint16_t>(n);
  return true;
}

struct MetricsHttpServer::Impl {
  asio::io_context io{1};
  tcp::acceptor acceptor{io};
  std::function<std::string()> render;
  std::atomic<int> sessions{0};
  std::thread thread;
  tcp::endpoint bound;
  class Session;
  std::vector<std::weak_ptr<Session>> live;  // used on the I/O thread only

  // One request, one response, then close. Owns itself (shared_from_this).
  class Session final : public std::enable_shared_from_this<Session> {
   public:
    Session(Impl* server, tcp::socket socket) : server_(server), stream_(std::move(socket)) {
      ++server_->sessions;
    }
    ~Session() { --server_->sessions; }

    // Ends the session now (at shutdown): pending operations are aborted.
    void Close() {
      beast::error_code ignored;
      stream_.socket().close(ignored);
    }

    void Start() {
      parser_.body_limit(kMaxRequestBytes);
      parser_.header_limit(kMaxRequestBytes);
      stream_.expires_after(kRequestTimeout);
      http::async_read(
          stream_, buffer_, parser_,
          [self = shared_from_this()](beast::error_code ec, size_t) { self->OnRead(ec); });
    }

   private:
    void OnRead(beast::error_code ec) {
      if (ec) return;  // timeout, reset, oversize: just close
      const auto& request = parser_.get();
      response_.version(request.version());
      response_.keep_alive(false);
      response_.set(http::field::server, "intentd");
      const std::string_view target(request.target().data(), request.target().size());
      const bool metrics = target == "/metrics" || target.rfind("/metrics?", 0) == 0;
      if (!metrics) {
        response_.result(http::status::not_found);
        response_.set(http::field::content_type, "text/plain; charset=utf-8");
        response_.body() = "not found; the metrics are at /metrics\n";
      } else if (request.method() != http::verb::get && request.method() != http::verb::head) {
        response_.result(http::status::method_not_allowed);
        response_.set(http::field::allow, "GET, HEAD");
        response_.set(http::field::content_type, "text/plain; charset=utf-8");
        response_.body() = "use GET\n";
      } else {
        response_.result(http::status::ok);
        response_.set(http::field::content_type, kPrometheusContentType);
        try {
          response_.body() = server_->render();
        } catch (const std::exception& e) {
          LogError(std::string("metrics endpoint: ") + e.what());
          response_.result(http::status::internal_server_error);
          response_.body() = "internal error; the agent's log has details\n";
        }
      }
      response_.prepare_payload();  // Content-Length of the body, HEAD included
      if (request.method() == http::verb::head) response_.body().clear();
      stream_.expires_after(kRequestTimeout);
      http::async_write(stream_, response_, [self = shared_from_this()](beast::error_code, size_t) {
        beast::error_code ignored;
        self->stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
      });
    }

    Impl* server_;
    beast::tcp_stream stream_;
    beast::flat_buffer buffer_;
    http::request_parser<http::string_body> parser_;
    http::response<http::string_body> response_;
  };

  void Accept() {
    acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
      if (!ec) {
        if (sessions.load() >= kMaxSessions) {
          beast::error_code ignored;
          socket.close(ignored);  // a scraper retries at its next interval
        } else {
          auto session = std::make_shared<Session>(this, std::move(socket));
          std::erase_if(live, [](const std::weak_ptr<Session>& w) { return w.expired(); });
          live.push_back(session);
          session->Start();
        }
      }
      Accept();
    });
  }
};

bool MetricsHttpServer::Start(const std::string& listen, std::function<std::string()> render,
                              std::unique_ptr<MetricsHttpServer>* server, std::string* error) {
  std::string address;
  uint16_t port = 0;
  if (!ParseMetricsListen(listen, &address, &port, error)) return false;
  auto impl = std::make_unique<Impl>();
  impl->render = std::move(render);
  const tcp::endpoint endpoint(asio::ip::make_address(address), port);
  boost::system::error_code ec;
  impl->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) impl->acceptor.bind(endpoint, ec);
  if (!ec) impl->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (!ec) impl->bound = impl->acceptor.local_endpoint(ec);
  if (ec) {
    *error = "cannot listen for metrics on " + listen + ": " + ec.message();
    return false;
  }
  impl->Accept();
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] {
    try {
      raw->io.run();
    } catch (const std::exception& e) {
      LogError(std::string("metrics endpoint stopped: ") + e.what());
    }
  });
  server->reset(new MetricsHttpServer(std::move(impl)));
  return true;
}

MetricsHttpServer::MetricsHttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

MetricsHttpServer::~MetricsHttpServer() {
  // Closing the acceptor and the open connections cancels every pending
  // operation, so the io_context runs out of work and its thread returns.
  asio::post(impl_->io, [impl = impl_.get()] {
    beast::error_code ignored;
    impl->acceptor.close(ignored);
    for (auto& weak : impl->live) {
      if (auto session = weak.lock()) session->Close();
    }
  });
  if (impl_->thread.joinable()) impl_->thread.join();
}

std::string MetricsHttpServer::endpoint() const {
  const auto& b = impl_->bound;
  return b.address().is_v6() ? "[" + b.address().to_string() + "]:" + std::to_string(b.port())
                             : b.address().to_string() + ":" + std::to_string(b.port());
}

}  // namespace intentd::agent
