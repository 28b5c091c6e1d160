// bench_transport [connections=16,64] [seconds=2] [handler_sleep_us=0] [depth=1]
//                 [worker_threads=64]
// Each connection is a client thread that sends `depth` request lines (~300
// bytes), reads the `depth` responses (~200 bytes) and repeats; latency is
// per round trip. The handler answers a fixed response, optionally after
// sleeping (a stand-in for a store that blocks on fsync).
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "transport/server.h"

namespace {

using Clock = std::chrono::steady_clock;
using intentd::transport::Handler;
using intentd::transport::PeerCredentials;
using intentd::transport::Server;
using intentd::transport::ServerOptions;
using intentd::transport::TransportError;

class BenchHandler : public Handler {
 public:
  explicit BenchHandler(int sleep_us) : sleep_us_(sleep_us) {}
  std::string HandleLine(const PeerCredentials&, std::string_view line) override {
    if (sleep_us_ > 0) std::this_thread::sleep_for(std::chrono::microseconds(sleep_us_));
    std::string response = R"({"id":1,"ok":true,"decision":"execute","key":")";
    response.append(64, 'a');
    response +=
        R"(","created":true,"diverged":false,"attempt":1,"lease_token":1,"lease_until_ms":1796000000000,"len":)";
    response += std::to_string(line.size()) + "}";
    return response;
  }
  std::string TransportErrorLine(TransportError) override { return R"({"ok":false})"; }

 private:
  int sleep_us_;
};

int Connect(const std::string& path) {
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    std::perror("connect");
    std::exit(1);
  }
  return fd;
}

// One closed-loop client; returns round-trip latencies in microseconds.
std::vector<double> RunClient(const std::string& path, Clock::time_point end, int depth) {
  int fd = Connect(path);
  std::string request =
      R"({"id":1,"op":"begin","tenant_id":"acme","intent_ref":"FAT-2026-000123",)"
      R"("action_type":"pix.cobranca","payload":{"cliente_id":"01J9ZQ3K8V7M2N4P6R8T0W2Y4A",)"
      R"("valor":"180.00","chave_pix_destino":"111.222.333-44",)"
      R"("referencia_intencao":"FAT-2026-000123"}})"
      "\n";
  std::string batch;
  for (int i = 0; i < depth; ++i) batch += request;
  std::vector<double> latencies;
  std::vector<char> buffer(1 << 16);
  while (Clock::now() < end) {
    const auto start = Clock::now();
    if (send(fd, batch.data(), batch.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(batch.size()))
      break;
    int newlines = 0;
    while (newlines < depth) {
      ssize_t n = recv(fd, buffer.data(), buffer.size(), 0);
      if (n <= 0) {
        close(fd);
        return latencies;
      }
      newlines += static_cast<int>(std::count(buffer.data(), buffer.data() + n, '\n'));
    }
    latencies.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
  }
  close(fd);
  return latencies;
}

void Run(const std::string& path, int connections, double seconds, int depth) {
  const auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(seconds));
  std::vector<std::vector<double>> results(connections);
  std::vector<std::thread> threads;
  rusage before{};
  getrusage(RUSAGE_SELF, &before);
  const auto start = Clock::now();
  for (int i = 0; i < connections; ++i) {
    threads.emplace_back([&, i] { results[i] = RunClient(path, end, depth); });
  }
  for (auto& thread : threads) thread.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  rusage after{};
  getrusage(RUSAGE_SELF, &after);
  auto cpu = [](const rusage& u) {
    return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
  };
  const double switches = (after.ru_nvcsw - before.ru_nvcsw) + (after.ru_nivcsw - before.ru_nivcsw);
  std::vector<double> all;
  for (auto& r : results) all.insert(all.end(), r.begin(), r.end());
  std::sort(all.begin(), all.end());
  auto pct = [&](double p) {
    return all.empty() ? 0.0 : all[std::min(all.size() - 1, size_t(p * all.size()))];
  };
  const double lines = static_cast<double>(all.size()) * depth;
  std::printf(
      "connections=%-3d depth=%d  lines/s=%8.0f  round trip us: p50=%7.1f p99=%7.1f max=%8.1f"
      "  cpu us/line=%5.1f  switches/line=%4.1f\n",
      connections, depth, lines / elapsed, pct(0.50), pct(0.99), all.empty() ? 0.0 : all.back(),
      (cpu(after) - cpu(before)) * 1e6 / lines, switches / lines);
}

std::vector<int> ParseList(const char* text) {
  std::vector<int> values;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) values.push_back(std::atoi(item.c_str()));
  return values;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> connections = ParseList(argc > 1 ? argv[1] : "16,64");
  const double seconds = argc > 2 ? std::atof(argv[2]) : 2.0;
  const int sleep_us = argc > 3 ? std::atoi(argv[3]) : 0;
  const int depth = argc > 4 ? std::atoi(argv[4]) : 1;

  char dir[] = "/tmp/intentd-bench-XXXXXX";
  if (mkdtemp(dir) == nullptr) return 1;
  const std::string path = std::string(dir) + "/bench.sock";
  BenchHandler handler(sleep_us);
  ServerOptions options;
  options.socket_path = path;
  if (argc > 5) options.worker_threads = std::atoi(argv[5]);
  std::unique_ptr<Server> server;
  auto result = Server::Start(options, &handler, &server);
  if (!result.ok) {
    std::fprintf(stderr, "%s\n", result.message.c_str());
    return 1;
  }
  std::printf("handler sleep %d us, workers %d\n", sleep_us, options.worker_threads);
  for (int n : connections) Run(path, n, seconds, depth);
  server->Stop(std::chrono::seconds(1));
  rmdir(dir);
  return 0;
}
