#include "protocol/dispatcher.h"

#include <chrono>
#include <cstdint>
#include <exception>
#include <future>
#include <memory>
#include <string>
#include <utility>

#include "common/log.h"
#include "protocol/ops.h"
#include "protocol/request_line.h"

namespace intentd::agent {

namespace {

// Whether `access` may run `spec` (OpSpec::access); false with the forbidden
// message in *message.
bool MayRun(const OpSpec& spec, const Access& access, uid_t uid, std::string* message) {
  if (spec.access == OpAccess::kAnyone) return true;
  if (!access.any_rule()) {
    *message = "no access rule names this connection's user (uid " + std::to_string(uid) +
               "); ask the operator to add one";
    return false;
  }
  if (spec.access != OpAccess::kAdmin && spec.access != OpAccess::kAdminOfAll) return true;
  if (!access.admin()) {
    *message = std::string(spec.name) +
               " needs admin rights; ask the operator to mark your user admin in the access rules";
    return false;
  }
  if (spec.access == OpAccess::kAdminOfAll && !access.all_tenants()) {
    *message = std::string(spec.name) + " " + std::string(spec.whole_store) +
               ": it needs an admin of every tenant (\"tenants\": [\"*\"] in the access rule), not "
               "one scoped to some";
    return false;
  }
  return true;
}

}  // namespace

OpError InternalError(std::string_view op, const std::exception& e) {
  LogError("internal error in op " + std::string(op) + ": " + e.what());
  return OpError{ErrorCode::kInternal, "internal error; the agent's log has details", ""};
}

store::Store::WriteDone AnswerWhenWritten(std::string_view op, AsyncAnswer* answer, StartDone done,
                                          FillAnswer fill, FinishAnswer finish) {
  // fill or finish, an exception answered as an internal error.
  auto answering = [op, answer](auto&& write) {
    try {
      write();
    } catch (const std::exception& e) {
      answer->ok = false;
      answer->error = InternalError(op, e);
    }
  };
  return [answer, answering, done = std::move(done), fill = std::move(fill),
          finish = std::move(finish)](const store::Status& st, store::Store::Rest rest) {
    if (!rest) {
      answering([&] { fill(st, answer); });
      done(nullptr);
      return;
    }
    done([answer, answering, fill, finish, rest = std::move(rest)] {
      answering([&] {
        if (finish) {
          finish(rest, answer);
        } else {
          fill(rest(), answer);
        }
      });
    });
  };
}

struct Dispatcher::Impl {
  const Config& config;
  Keyring borrowed;  // the keyring of a Dispatcher given one deriver
  const Keyring& keyring;
  store::Store* store;
  DispatcherOptions options;
  // begin and complete start on the io thread (StartFn): a store with
  // asynchronous writes, not one that never blocks. Asked once.
  const bool start_writes;
  const store::Clock& clock;
  Stats stats;

  Impl(const Config& c, const Keyring* k, const normalizers::KeyDeriver* d, store::Store* s,
       const DispatcherOptions& o)
      : config(c),
        borrowed(d != nullptr ? Keyring::Borrowed(*d) : Keyring()),
        keyring(k != nullptr ? *k : borrowed),
        store(s),
        options(o),
        start_writes(!o.quick_store && s->SupportsAsyncWrites()),
        clock(o.clock != nullptr ? *o.clock : store::SystemClock()) {
    stats.started_at_ms = clock.NowMs();
    std::vector<std::string> types;
    for (const auto& t : config.catalog.types()) types.push_back(t.name);
    stats.SetActionTypes(std::move(types));
    stats.prevented.SetActionTypes(config.catalog.types());
    stats.tenant_labels = config.metrics.tenant_labels;
  }

  std::string Error(const std::string& id_text, ErrorCode code, const std::string& message,
                    const std::string& field = "") {
    stats.errors[static_cast<size_t>(code)].fetch_add(1);
    return ErrorLine(id_text, code, message, field);
  }

  // A request, parsed and routed: which op, and the id to echo.
  struct Request {
    ParsedLine parsed;
    size_t op = kOpCount;
    std::string id_text;
    std::chrono::steady_clock::time_point started;
  };

  // Parses the line and finds its op. False with the error line in *line.
  bool Route(std::string_view line, Request* request, std::string* error_line) {
    request->started = std::chrono::steady_clock::now();
    stats.requests.fetch_add(1);
    ParsedLine& parsed = request->parsed;
    const LineParse parse = ParseRequestLine(line, &parsed);
    if (parse == LineParse::kTooDeep) {
      *error_line = Error("", ErrorCode::kBadRequest,
                          "the request is nested deeper than " + std::to_string(kMaxRequestDepth) +
                              " levels; send a flatter JSON object");
      return false;
    }
    if (parse != LineParse::kOk) {
      *error_line = Error("", ErrorCode::kBadRequest,
                          "the line is not valid JSON in UTF-8 (" + parsed.error +
                              "); send one JSON object per line");
      return false;
    }
    const JsonView value = parsed.value();
    if (!value.is_object()) {
      *error_line = Error("", ErrorCode::kBadRequest,
                          "the request must be a JSON object like {\"op\":\"ping\"}");
      return false;
    }
    std::string& id_text = request->id_text;
    if (const JsonView id = value.find("id"); !id.absent()) {
      if (!parsed.raw_id.empty() && id.type() == JsonView::Type::kFloat) {
        id_text = parsed.raw_id;
      } else {
        AppendJson(id, &id_text);
      }
      if (id.is_object() || id.is_array()) {
        *error_line = Error(id_text, ErrorCode::kBadRequest,
                            "id must be a string, number, bool or null", "id");
        return false;
      }
    }
    const JsonView op_value = value.find("op");
    if (!op_value.is_string()) {
      *error_line = Error(id_text, ErrorCode::kBadRequest,
                          "op is required: a string such as \"begin\" or \"ping\"", "op");
      return false;
    }
    request->op = FindOp(op_value.string());
    if (request->op == kOpCount) {
      *error_line =
          Error(id_text, ErrorCode::kUnknownOp,
                "unknown op \"" + std::string(op_value.string()) + "\"; ops: " + OpList(), "op");
      return false;
    }
    return true;
  }

  // Runs a routed request's op; the response line.
  // trusted: the agent's own request (HandleTrusted), with every right.
  std::string Run(const transport::PeerCredentials& peer, const Request& request,
                  bool trusted = false) {
    static const std::vector<AccessRule> kNoRules;
    const OpSpec& spec = kOps[request.op];
    const std::string& id_text = request.id_text;
    Access access(trusted ? kNoRules : config.access, peer);
    if (std::string forbidden; !MayRun(spec, access, peer.uid, &forbidden)) {
      return Error(id_text, ErrorCode::kForbidden, forbidden);
    }
    const JsonView value = request.parsed.value();
    OpContext ctx{value, access, config, keyring, *store, clock, stats, options.rules_version};
    Reply reply;
    OpError error;
    bool ok = false;
    // Observed on every return below, errors included.
    struct Timer {
      Impl& impl;
      const Request& request;
      ~Timer() { impl.Observe(request); }
    } timer{*this, request};
    try {
      ok = spec.run(ctx, &reply, &error);
    } catch (const std::exception& e) {
      error = InternalError(spec.name, e);
      ok = false;
    }
    if (!ok) return Error(id_text, error.code, error.message, error.field);
    return SuccessLine(id_text, reply);
  }

  // A routed request whose op has a StartFn, on a store with asynchronous
  // writes: answered through `done` from the store's thread, without a
  // worker; or the rest of its write, when the store left it to a thread
  // that may block (a redelivery), deferred to a worker; or, when nothing
  // started (not the store's case, or bad arguments, which the op then
  // reports), the whole op deferred to a worker (Answer).
  // The store commits before it calls back: no durability ticket.
  void Start(const transport::PeerCredentials& peer, std::shared_ptr<Request> request,
             std::function<void(transport::Reply)> done) {
    const OpSpec& spec = kOps[request->op];
    // What the op reads until its answer: kept by the store's callback.
    struct Started {
      Started(Impl& impl, const transport::PeerCredentials& peer, std::shared_ptr<Request> r)
          : request(std::move(r)),
            value(request->parsed.value()),
            access(impl.config.access, peer),
            ctx{value,       access,     impl.config, impl.keyring,
                *impl.store, impl.clock, impl.stats,  impl.options.rules_version} {}
      std::shared_ptr<Request> request;
      const JsonView value;
      const Access access;
      const OpContext ctx;
      AsyncAnswer answer;
    };
    auto whole = [this, &peer, request] {
      transport::Reply reply;
      reply.deferred = [this, &peer, request] { return Answer(peer, *request); };
      return reply;
    };
    bool started_write = false;
    try {
      auto started = std::make_shared<Started>(*this, peer, request);
      if (std::string forbidden; !MayRun(spec, started->access, peer.uid, &forbidden)) {
        transport::Reply reply;
        reply.line = Error(request->id_text, ErrorCode::kForbidden, forbidden);
        done(std::move(reply));
        return;
      }
      // The started op's answer line, once *answer holds its outcome.
      auto answered = [this, started] {
        transport::Reply reply;
        const AsyncAnswer& answer = started->answer;
        const std::string& id_text = started->request->id_text;
        try {
          reply.line = answer.ok ? SuccessLine(id_text, answer.reply)
                                 : Error(id_text, answer.error.code, answer.error.message,
                                         answer.error.field);
        } catch (...) {
          reply.line = ErrorLine("", ErrorCode::kInternal, "internal error", "");
        }
        Observe(*started->request);
        return reply;
      };
      started_write =
          spec.start(started->ctx, &started->answer, [done, answered](std::function<void()> job) {
            if (!job) {
              done(answered());
              return;
            }
            // The rest of the write, on a worker.
            transport::Reply reply;
            reply.deferred = [answered, job = std::move(job)] {
              job();
              return answered();
            };
            done(std::move(reply));
          });
    } catch (...) {
      started_write = false;  // threw before the store took the write
    }
    if (!started_write) done(whole());
  }

  // The op's latency, from its line's parse to its answer.
  void Observe(const Request& request) {
    stats.latency[request.op].Observe(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                          std::chrono::steady_clock::now() - request.started)
                                          .count());
  }

  // Run, then the durability ticket for an op on records: taken after the
  // operation, it covers what the op wrote and what it read. A reply that
  // holds nothing read from the store needs none: it must not wait for (or
  // fail with) a sync, e.g. a ping while the disk is full.
  transport::Reply Answer(const transport::PeerCredentials& peer, const Request& request,
                          bool trusted = false) {
    transport::Reply reply;
    try {
      reply.line = Run(peer, request, trusted);
    } catch (...) {
      reply.line = ErrorLine("", ErrorCode::kInternal, "internal error", "");
      return reply;
    }
    if (!kOps[request.op].on_records) return reply;
    reply.durable_ticket = store->DurabilityTicket();
    if (reply.durable_ticket != 0) {
      // Made for every held reply and almost never sent: the members after
      // the id are serialized once.
      static const std::string kLost =
          ErrorLine("", ErrorCode::kStorageError,
                    "the store could not make this request durable (writing or syncing the WAL "
                    "failed); nothing was granted; retry with the same request",
                    "");
      reply.line_if_lost =
          request.id_text.empty() ? kLost : "{\"id\":" + request.id_text + "," + kLost.substr(1);
    }
    return reply;
  }
};

Dispatcher::Dispatcher(const Config& config, const Keyring& keyring, store::Store* store,
                       const DispatcherOptions& options)
    : impl_(std::make_unique<Impl>(config, &keyring, nullptr, store, options)) {}

Dispatcher::Dispatcher(const Config& config, const normalizers::KeyDeriver& deriver,
                       store::Store* store, const DispatcherOptions& options)
    : impl_(std::make_unique<Impl>(config, nullptr, &deriver, store, options)) {}

Dispatcher::~Dispatcher() = default;

namespace {

// Waits until the reply's durability ticket is durable (callers that answer
// synchronously: tests, tools, the agent's own reconciler).
std::string Durable(store::Store* store, const transport::Reply& reply) {
  if (reply.durable_ticket == 0) return reply.line;
  std::promise<bool> durable;
  store->WhenDurable(reply.durable_ticket,
                     [&durable](const store::Status& s) { durable.set_value(s.ok()); });
  return durable.get_future().get() ? reply.line : reply.line_if_lost;
}

}  // namespace

std::string Dispatcher::HandleTrusted(std::string_view line) {
  Impl::Request request;
  std::string error_line;
  try {
    if (!impl_->Route(line, &request, &error_line)) return error_line;
  } catch (...) {
    return ErrorLine("", ErrorCode::kInternal, "internal error", "");
  }
  return Durable(impl_->store, impl_->Answer(transport::PeerCredentials{}, request, true));
}

Stats& Dispatcher::mutable_stats() { return impl_->stats; }

std::string Dispatcher::HandleLine(const transport::PeerCredentials& peer, std::string_view line) {
  transport::Reply reply = Handle(peer, line);
  if (reply.start) {
    std::promise<transport::Reply> answered;
    reply.start([&answered](transport::Reply r) { answered.set_value(std::move(r)); });
    reply = answered.get_future().get();
  }
  if (reply.deferred) reply = reply.deferred();
  return Durable(impl_->store, reply);
}

transport::Reply Dispatcher::Handle(const transport::PeerCredentials& peer, std::string_view line) {
  Impl::Request request;
  transport::Reply reply;
  try {
    if (!impl_->Route(line, &request, &reply.line)) return reply;
  } catch (...) {
    reply.line = ErrorLine("", ErrorCode::kInternal, "internal error", "");
    return reply;
  }
  // Routed after the parse: a slow op, or any op of a store that may block
  // (PostgreSQL), runs on a worker, with the parsed request. So does a large
  // batch (OpSpec::batch).
  const OpSpec& spec = kOps[request.op];
  const bool large_batch =
      !spec.batch.empty() &&
      request.parsed.value().find(spec.batch).Elements().size() > kQuickBatchElements;
  if (!spec.slow && spec.start != nullptr && impl_->start_writes) {
    reply.start = [impl = impl_.get(), &peer,
                   moved = std::make_shared<Impl::Request>(std::move(request))](
                      std::function<void(transport::Reply)> done) {
      impl->Start(peer, moved, std::move(done));
    };
    return reply;
  }
  if (spec.slow || !impl_->options.quick_store || large_batch) {
    reply.deferred = [impl = impl_.get(), &peer,
                      moved = std::make_shared<Impl::Request>(std::move(request))] {
      return impl->Answer(peer, *moved);
    };
    return reply;
  }
  return impl_->Answer(peer, request);
}

std::string Dispatcher::TransportErrorLine(transport::TransportError error) {
  switch (error) {
    case transport::TransportError::kFrameTooLarge:
      return impl_->Error("", ErrorCode::kFrameTooLarge,
                          "the line is longer than the frame limit; send requests under " +
                              std::to_string(impl_->config.limits.max_frame_bytes) +
                              " bytes (the connection is closed)");
    case transport::TransportError::kOverloaded:
      return impl_->Error("", ErrorCode::kOverloaded,
                          "too many connections; retry later or reuse a pooled connection");
    case transport::TransportError::kShuttingDown:
      return impl_->Error("", ErrorCode::kShuttingDown,
                          "the agent is shutting down; retry on a new connection shortly");
  }
  return impl_->Error("", ErrorCode::kInternal, "internal error");
}

void Dispatcher::OnConnectionOpened() {
  impl_->stats.connections.fetch_add(1);
  impl_->stats.connections_total.fetch_add(1);
}

void Dispatcher::OnConnectionClosed() { impl_->stats.connections.fetch_sub(1); }

const Stats& Dispatcher::stats() const { return impl_->stats; }

std::string Dispatcher::MetricsText() {
  const JsonView none;                                   // no request: every member absent
  const Access admin({}, transport::PeerCredentials{});  // no rules: every right
  OpContext ctx{
      none,          admin,        impl_->config, impl_->keyring,
      *impl_->store, impl_->clock, impl_->stats,  impl_->options.rules_version,
  };
  // The HTTP listener (--metrics-listen) has no peer the access rules could
  // judge: it serves what any connection may read, no per-tenant series
  // (those stay on the socket's metrics op, for admins).
  return RenderMetrics(ctx, TenantFilter());
}

}  // namespace intentd::agent
