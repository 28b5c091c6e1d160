#include "agent/dispatcher.h"

#include <array>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <exception>
#include <future>
#include <iterator>
#include <string>
#include <unordered_map>
#include <utility>

#include "agent/log.h"
#include "agent/ops.h"
#include "agent/request_line.h"

namespace intentd::agent {

const char kSoftwareVersion[] = INTENTD_VERSION;

std::string_view ErrorCodeName(ErrorCode code) {
  static constexpr std::string_view kNames[kErrorCodeCount] = {
      "bad_request",    "frame_too_large", "unknown_op",    "unknown_action_type",
      "missing_field",  "invalid_field",   "payload_mismatch", "not_found",
      "lease_lost",     "invalid_state",   "forbidden",     "overloaded",
      "storage_error",  "shutting_down",   "internal"};
  return kNames[static_cast<size_t>(code)];
}

namespace {

// The ops that never run on the io thread (Handler::Quick): they may take
// long (a backup, an uncertain scan) or read every counter.
constexpr std::string_view kSlowOps[] = {"backup", "uncertain", "metrics", "stats"};
constexpr size_t kLongestSlowOp = [] {
  size_t longest = 0;
  for (const std::string_view name : kSlowOps)
    longest = name.size() > longest ? name.size() : longest;
  return longest;
}();

// kSlowOps by first letter, -1 for none. Two names with one first letter
// would not compile (the throw is not a constant expression).
constexpr std::array<int8_t, 256> kSlowOpByFirst = [] {
  std::array<int8_t, 256> table{};
  table.fill(-1);
  for (size_t i = 0; i < std::size(kSlowOps); ++i) {
    int8_t& slot = table[static_cast<unsigned char>(kSlowOps[i].front())];
    if (slot != -1) throw "kSlowOps: two names with one first letter";
    slot = static_cast<int8_t>(i);
  }
  return table;
}();

// Whether what follows an opening quote spells a slow op's name as a whole
// string, or may: a string beginning with an escape, or with a slow op's
// first letter and holding an escape before its end ("st\u0061ts").
bool NamesSlowOp(std::string_view rest) {
  if (rest.empty()) return false;
  if (rest.front() == '\\') return true;
  const int8_t index = kSlowOpByFirst[static_cast<unsigned char>(rest.front())];
  if (index < 0) return false;
  const std::string_view name = kSlowOps[index];
  if (rest.size() > name.size() && rest[name.size()] == '"' &&
      rest.compare(0, name.size(), name) == 0) {
    return true;
  }
  // Up to the longest name written with every letter escaped (\uXXXX).
  const std::string_view head = rest.substr(0, 6 * kLongestSlowOp);
  return head.substr(0, head.find('"')).find('\\') != std::string_view::npos;
}

// Sixteen bytes at a time: which bytes are among NamesSlowOp's first ones
// (an escape, a slow op's first letter), one compare per letter.
using Bytes = unsigned char __attribute__((vector_size(16)));
template <size_t... I>
auto SlowOpFirstBytes(Bytes next, std::index_sequence<I...>) {
  return ((next == static_cast<unsigned char>(kSlowOps[I].front())) | ... |
          (next == static_cast<unsigned char>('\\')));
}

struct OpEntry {
  OpFn fn;
  size_t index;  // in kOpNames
  // The op reads or writes the store's records, so its reply waits for the
  // sync that covers them. The others (counters, sizes, key derivation) must
  // answer without one, e.g. while the disk is full.
  bool on_records;
};

const std::unordered_map<std::string_view, OpEntry>& OpTable() {
  static const auto* table = [] {
    // In kOpNames' order: the function, and whether it is on records.
    constexpr std::array<std::pair<OpFn, bool>, kOpCount> kOps = {{
        {OpPing, false},
        {OpDerive, false},
        {OpFreeze, true},
        {OpBegin, true},
        {OpComplete, true},
        {OpFail, true},
        {OpRenew, true},
        {OpStatus, true},
        {OpLookup, true},
        {OpAmend, true},
        {OpUncertain, true},
        {OpStats, false},
        {OpMetrics, false},
        {OpBackup, true},
    }};
    auto* t = new std::unordered_map<std::string_view, OpEntry>;
    for (size_t i = 0; i < kOpCount; ++i) {
      t->emplace(kOpNames[i], OpEntry{kOps[i].first, i, kOps[i].second});
    }
    return t;
  }();
  return *table;
}

std::string OpList() {
  std::string out;
  for (std::string_view name : kOpNames) {
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

// The start of every response line: "{" and the echoed id, if any.
void AppendLineStart(const std::string& id_text, std::string* line) {
  line->push_back('{');
  if (!id_text.empty()) line->append("\"id\":").append(id_text).append(",");
}

std::string LineStart(const std::string& id_text) {
  std::string line;
  AppendLineStart(id_text, &line);
  return line;
}

std::string ErrorLine(const std::string& id_text, ErrorCode code, const std::string& message,
                      const std::string& field) {
  std::string line = LineStart(id_text);
  line += "\"ok\":false,\"error\":{\"code\":\"";
  line += ErrorCodeName(code);
  line += "\",\"message\":";
  line += json(message).dump(-1, ' ', false, json::error_handler_t::replace);
  if (!field.empty()) {
    line += ",\"field\":";
    line += json(field).dump(-1, ' ', false, json::error_handler_t::replace);
  }
  line += "}}";
  return line;
}

}  // namespace

struct Dispatcher::Impl {
  const Config& config;
  const normalizers::KeyDeriver& deriver;
  store::Store* store;
  DispatcherOptions options;
  const store::Clock& clock;
  Stats stats;

  Impl(const Config& c, const normalizers::KeyDeriver& d, store::Store* s,
       const DispatcherOptions& o)
      : config(c), deriver(d), store(s), options(o),
        clock(o.clock != nullptr ? *o.clock : store::SystemClock()) {
    stats.started_at_ms = clock.NowMs();
    std::vector<std::string> types;
    for (const auto& t : config.catalog.types()) types.push_back(t.name);
    stats.SetActionTypes(std::move(types));
    stats.tenant_labels = config.metrics.tenant_labels;
  }

  std::string Error(const std::string& id_text, ErrorCode code, const std::string& message,
                    const std::string& field = "") {
    stats.errors[static_cast<size_t>(code)].fetch_add(1);
    return ErrorLine(id_text, code, message, field);
  }

  // *id_text: the request's id as echoed (empty when none or unparsed).
  // *on_records: the op ran and reads or writes the store's records.
  std::string Handle(const transport::PeerCredentials& peer, std::string_view line,
                     std::string* id_text_out, bool* on_records) {
    const auto started = std::chrono::steady_clock::now();
    stats.requests.fetch_add(1);
    ParsedLine parsed;
    const LineParse parse = ParseRequestLine(line, &parsed);
    if (parse == LineParse::kTooDeep) {
      return Error("", ErrorCode::kBadRequest,
                   "the request is nested deeper than " + std::to_string(kMaxRequestDepth) +
                       " levels; send a flatter JSON object");
    }
    if (parse != LineParse::kOk) {
      return Error("", ErrorCode::kBadRequest,
                   "the line is not valid JSON in UTF-8 (" + parsed.error +
                       "); send one JSON object per line");
    }
    if (!parsed.value.is_object()) {
      return Error("", ErrorCode::kBadRequest,
                   "the request must be a JSON object like {\"op\":\"ping\"}");
    }
    // The dispatcher and begin look up eight members: one pass over the
    // line's object for all of them.
    const JsonView::MemberList members = parsed.value.Members();
    const JsonView request = parsed.value.Indexed(&members);
    std::string id_text;
    if (const JsonView id = request.find("id"); !id.absent()) {
      if (!parsed.raw_id.empty() && id.type() == JsonView::Type::kFloat) {
        id_text = parsed.raw_id;
      } else {
        AppendJson(id, &id_text);
      }
      if (id.is_object() || id.is_array()) {
        return Error(id_text, ErrorCode::kBadRequest, "id must be a string, number, bool or null",
                     "id");
      }
      *id_text_out = id_text;
    }
    const JsonView op_value = request.find("op");
    if (!op_value.is_string()) {
      return Error(id_text, ErrorCode::kBadRequest,
                   "op is required: a string such as \"begin\" or \"ping\"", "op");
    }
    const std::string_view op = op_value.string();
    auto fn = OpTable().find(op);
    if (fn == OpTable().end()) {
      return Error(id_text, ErrorCode::kUnknownOp,
                   "unknown op \"" + std::string(op) + "\"; ops: " + OpList(), "op");
    }
    Access access(config.access, peer);
    if (!access.any_rule() && op != "ping") {
      return Error(id_text, ErrorCode::kForbidden,
                   "no access rule names this connection's user (uid " + std::to_string(peer.uid) +
                       "); ask the operator to add one");
    }
    OpContext ctx{request, access, config,         deriver,
                  *store,  clock,  stats,          options.rules_version,
                  options.store_admin};
    Reply reply;
    OpError error;
    bool ok = false;
    // Observed on every return below, errors included.
    struct Timer {
      LatencyHistogram& histogram;
      std::chrono::steady_clock::time_point started;
      ~Timer() {
        histogram.Observe(std::chrono::duration_cast<std::chrono::nanoseconds>(
                              std::chrono::steady_clock::now() - started)
                              .count());
      }
    } timer{stats.latency[fn->second.index], started};
    *on_records = fn->second.on_records;
    try {
      ok = fn->second.fn(ctx, &reply, &error);
    } catch (const std::exception& e) {
      LogError("internal error in op " + std::string(op) + ": " + e.what());
      error = OpError{ErrorCode::kInternal, "internal error; the agent's log has details", ""};
      ok = false;
    }
    if (!ok) return Error(id_text, error.code, error.message, error.field);
    std::string out;
    out.reserve(id_text.size() + reply.body().size() + 16);
    AppendLineStart(id_text, &out);
    out += "\"ok\":true";
    out += reply.body();
    out += "}";
    return out;
  }
};

Dispatcher::Dispatcher(const Config& config, const normalizers::KeyDeriver& deriver,
                       store::Store* store, const DispatcherOptions& options)
    : impl_(std::make_unique<Impl>(config, deriver, store, options)) {}

Dispatcher::~Dispatcher() = default;

std::string Dispatcher::HandleLine(const transport::PeerCredentials& peer, std::string_view line) {
  transport::Reply reply = Handle(peer, line);
  if (reply.durable_ticket == 0) return reply.line;
  // Callers of the plain form wait here (tests and tools; the server uses
  // Handle).
  std::promise<bool> durable;
  impl_->store->WhenDurable(reply.durable_ticket,
                            [&durable](const store::Status& s) { durable.set_value(s.ok()); });
  return durable.get_future().get() ? reply.line : reply.line_if_lost;
}

transport::Reply Dispatcher::Handle(const transport::PeerCredentials& peer,
                                    std::string_view line) {
  transport::Reply reply;
  std::string id_text;
  bool on_records = false;
  try {
    reply.line = impl_->Handle(peer, line, &id_text, &on_records);
  } catch (...) {
    reply.line = ErrorLine("", ErrorCode::kInternal, "internal error", "");
    return reply;
  }
  // Taken after the operation: covers what it wrote and what it read. A
  // reply that holds nothing read from the store needs none: it must not
  // wait for (or fail with) a sync, e.g. a ping while the disk is full.
  if (!on_records) return reply;
  reply.durable_ticket = impl_->store->DurabilityTicket();
  if (reply.durable_ticket != 0) {
    // Made for every held reply and almost never sent: the part after the
    // id is serialized once.
    static const std::string kLostAfterId =
        ErrorLine("", ErrorCode::kStorageError,
                  "the store could not make this request durable (writing or syncing the WAL "
                  "failed); nothing was granted; retry with the same request",
                  "")
            .substr(LineStart("").size());
    reply.line_if_lost = LineStart(id_text) + kLostAfterId;
  }
  return reply;
}

bool Dispatcher::Quick(std::string_view line) {
  if (!impl_->options.quick_store) return false;
  // A cheap look, no parse: a line naming a slow op anywhere (even inside a
  // payload) goes to a worker, which is always correct, only slower. Sixteen
  // bytes at a time, only a quote followed by one of NamesSlowOp's first
  // bytes is looked at closer: a few per line, where one memchr per quote
  // was ~3% of the io thread's instructions per request.
  const auto load = [](const char* at) {
    Bytes v;
    std::memcpy(&v, at, sizeof(v));
    return v;
  };
  const char* const data = line.data();
  const size_t size = line.size();
  const auto slow_at = [&](size_t at) {
    return data[at] == '"' && NamesSlowOp(line.substr(at + 1));
  };
  size_t i = 0;
  for (; i + 17 <= size; i += 16) {
    const Bytes next = load(data + i + 1);
    const auto candidates = (load(data + i) == '"') &
                            SlowOpFirstBytes(next, std::make_index_sequence<std::size(kSlowOps)>());
    uint64_t halves[2];
    std::memcpy(halves, &candidates, sizeof(halves));
    if ((halves[0] | halves[1]) == 0) continue;
    for (size_t at = i; at < i + 16; ++at) {
      if (slow_at(at)) return false;
    }
  }
  for (; i < size; ++i) {
    if (slow_at(i)) return false;
  }
  return true;
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
  OpContext ctx{none,          admin,          impl_->config,
                impl_->deriver, *impl_->store, impl_->clock,
                impl_->stats,  impl_->options.rules_version, impl_->options.store_admin};
  return RenderMetrics(ctx, impl_->config.metrics.tenant_labels);
}

}  // namespace intentd::agent
