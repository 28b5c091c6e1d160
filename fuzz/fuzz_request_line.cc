// The request line parser and dispatch: agent::Dispatcher::HandleLine on a
// real RocksDB store (sync off, in a temporary directory removed at exit) with
// a manual clock that moves 400 ms per line, so leases expire within a run.
// Input: one or more request lines separated by '\n' (at most 64 per input).
// Every answer must be one line of JSON, an object with a boolean "ok", a
// known error code when not ok (never "internal"), and the request's "id"
// echoed when the request was an object with a string or integer id. The
// request parser (protocol/request_line.h) must agree with json::parse.
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>

#include "common/config.h"
#include "normalizers/key_derivation.h"
#include "protocol/dispatcher.h"
#include "protocol/ops.h"
#include "protocol/request_line.h"
#include "store/clock.h"
#include "store/rocks/rocks_store.h"

namespace {

using nlohmann::json;
namespace agent = intentd::agent;
namespace store = intentd::store;

struct World {
  std::string dir;
  store::ManualClock clock{1796000000000};
  agent::Config config;
  std::unique_ptr<intentd::normalizers::KeyDeriver> deriver;
  std::unique_ptr<store::RocksStore> rocks;
  std::unique_ptr<agent::Dispatcher> dispatcher;
  intentd::transport::PeerCredentials peer;
};

World* world = nullptr;

void RemoveWorld() {
  if (world == nullptr) return;
  // The store is left open: at exit RocksDB's own static objects (its default
  // Env and logger) may already be destroyed, and closing a DB then crashes.
  // The process is ending; only its files need removing.
  std::error_code ec;
  std::filesystem::remove_all(world->dir, ec);
}

World* GetWorld() {
  if (world != nullptr) return world;
  world = new World;
  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/intentd-fuzz-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) std::abort();
  world->dir = tmpl;
  std::atexit(RemoveWorld);
  std::string error;
  // A configured type with one field of every kind, beside the built-ins.
  const char* config = R"({"action_types": {"fuzz.every_kind": {"fields": [
      {"name": "t", "kind": "text"}, {"name": "tr", "kind": "trim"},
      {"name": "lt", "kind": "lower-trim"}, {"name": "m", "kind": "money"},
      {"name": "k", "kind": "pix-key"}]}}})";
  if (!agent::ParseConfig(config, &world->config, &error)) {
    std::fprintf(stderr, "config: %s\n", error.c_str());
    std::abort();
  }
  world->deriver = std::make_unique<intentd::normalizers::KeyDeriver>(
      "fuzz-hmac-secret-0123456789abcdef0123456789");
  store::RocksOptions options;
  options.path = world->dir + "/data";
  options.sync = false;
  options.clock = &world->clock;
  options.block_cache_bytes = 8u << 20;
  store::Status st = store::RocksStore::Open(options, &world->rocks);
  if (!st.ok()) {
    std::fprintf(stderr, "RocksStore::Open: %s\n", st.message().c_str());
    std::abort();
  }
  agent::DispatcherOptions d;
  d.clock = &world->clock;
  world->dispatcher =
      std::make_unique<agent::Dispatcher>(world->config, *world->deriver, world->rocks.get(), d);
  world->peer.pid = getpid();
  world->peer.uid = getuid();
  world->peer.gid = getgid();
  world->peer.groups = {getgid()};
  return world;
}

const std::set<std::string>& KnownCodes() {
  static const std::set<std::string> codes(std::begin(agent::kErrorCodeNames),
                                           std::end(agent::kErrorCodeNames));
  return codes;
}

[[noreturn]] void Fail(const char* what, std::string_view line, const std::string& answer) {
  std::fprintf(stderr, "%s\n  request: %.*s\n  answer:  %s\n", what, static_cast<int>(line.size()),
               line.data(), answer.c_str());
  std::abort();
}

int Depth(const json& v) {
  int deepest = 0;
  if (v.is_object() || v.is_array()) {
    for (const json& e : v) deepest = std::max(deepest, Depth(e));
    return deepest + 1;
  }
  return 0;
}

// The request parser reads what json::parse builds (==, and the same text as
// AppendJson writes it), or refuses what it refuses (with a message), or
// says kTooDeep for a document nested deeper than the limit.
void CheckParse(std::string_view line) {
  agent::ParsedLine parsed;
  const agent::LineParse got = agent::ParseRequestLine(line, &parsed);
  if (line.find('\0') != std::string_view::npos) {
    // A raw NUL byte ends nlohmann's input; it is refused here wherever it is.
    if (got == agent::LineParse::kOk) Fail("accepted a line with a NUL byte", line, "");
    return;
  }
  json expected;
  try {
    expected = json::parse(line);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for 1e400
    if (got != agent::LineParse::kInvalid)
      Fail("accepted what json::parse refuses", line, e.what());
    if (parsed.error.empty()) Fail("refused without a message", line, e.what());
    return;
  }
  if (Depth(expected) > agent::kMaxRequestDepth) {
    if (got != agent::LineParse::kTooDeep) Fail("too deep, not refused", line, "");
    return;
  }
  if (got != agent::LineParse::kOk) Fail("refused what json::parse accepts", line, parsed.error);
  std::string text;
  agent::AppendJson(parsed.value(), &text);
  const std::string expected_text = expected.dump(-1, ' ', false, json::error_handler_t::replace);
  if (parsed.value().ToJson() != expected || text != expected_text) {
    Fail("not what json::parse builds", line, text);
  }
}

void CheckOne(World* w, std::string_view line) {
  CheckParse(line);
  const std::string answer = w->dispatcher->HandleLine(w->peer, line);
  w->clock.Advance(400);
  if (answer.empty() || answer.find('\n') != std::string::npos) {
    Fail("the answer is not one line", line, answer);
  }
  const json r = json::parse(answer, nullptr, false);
  if (r.is_discarded() || !r.is_object()) Fail("the answer is not a JSON object", line, answer);
  const auto ok = r.find("ok");
  if (ok == r.end() || !ok->is_boolean()) Fail("the answer has no boolean ok", line, answer);
  if (!ok->get<bool>()) {
    const auto error = r.find("error");
    if (error == r.end() || !error->is_object() || !error->contains("code") ||
        !(*error)["code"].is_string() || !error->contains("message")) {
      Fail("an error answer without error.code and error.message", line, answer);
    }
    const std::string code = (*error)["code"];
    if (code == "internal") Fail("internal error", line, answer);
    if (!KnownCodes().count(code)) Fail("unknown error code", line, answer);
  }
  // nlohmann reads a line only up to a raw NUL byte, which the agent refuses
  // (CheckParse): such a line has no id to echo.
  const json request = line.find('\0') == std::string_view::npos ? json::parse(line, nullptr, false)
                                                                 : json(json::value_t::discarded);
  if (request.is_object() && request.contains("id")) {
    const json& id = request["id"];
    if ((id.is_string() || id.is_number_integer()) && (!r.contains("id") || r["id"] != id)) {
      Fail("the id was not echoed", line, answer);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  World* w = GetWorld();
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  size_t pos = 0;
  for (int lines = 0; lines < 64 && pos <= input.size(); ++lines) {
    size_t nl = input.find('\n', pos);
    if (nl == std::string_view::npos) nl = input.size();
    CheckOne(w, input.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return 0;
}
