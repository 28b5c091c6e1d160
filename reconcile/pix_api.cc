#include "reconcile/pix_api.h"

#include <curl/curl.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <ctime>
#include <mutex>
#include <nlohmann/json.hpp>

#include "reconcile/support.h"

namespace intentd::reconcile {
namespace {

using nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

constexpr size_t kMaxSecretBytes = 64 << 10;
constexpr size_t kMaxKeyBytes = 64 << 10;
constexpr size_t kMaxCertBytes = 1 << 20;
constexpr size_t kMaxCaBytes = 4 << 20;
constexpr size_t kMaxBodyBytes = 1 << 20;  // a charge is a few KiB
constexpr int64_t kMaxRetryAfterMs = 24LL * 3600 * 1000;
constexpr size_t kMaxQuote = 160;  // bytes of a server's text quoted in a detail

const char* const kChargeStatuses[] = {"ATIVA", "CONCLUIDA", "REMOVIDA_PELO_USUARIO_RECEBEDOR",
                                       "REMOVIDA_PELO_PSP"};

std::once_flag curl_init_once;
CURLcode curl_init_result = CURLE_OK;

bool InitCurl(std::string* error) {
  std::call_once(curl_init_once, [] { curl_init_result = curl_global_init(CURL_GLOBAL_DEFAULT); });
  if (curl_init_result != CURLE_OK) {
    *error = std::string("cannot initialize libcurl: ") + curl_easy_strerror(curl_init_result);
    return false;
  }
  return true;
}

bool StartsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

std::string OpenSslError() {
  unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return std::string(" (") + buf + ")";
}

// Refuses to prompt for a passphrase: an encrypted key fails to load.
int NoPassphrase(char*, int, int, void*) { return -1; }

// Checks the PEM files curl will be given, so that a wrong file is a startup
// error rather than a "tls" answer for every action.
bool CheckPem(const PixApiSettings& s, const std::string& cert, const std::string& key,
              const std::string& ca, std::string* error) {
  ERR_clear_error();
  BIO* cert_bio = BIO_new_mem_buf(cert.data(), static_cast<int>(cert.size()));
  X509* x509 = cert_bio ? PEM_read_bio_X509(cert_bio, nullptr, nullptr, nullptr) : nullptr;
  BIO_free(cert_bio);
  if (x509 == nullptr) {
    *error =
        "the client certificate file " + s.cert_file + " holds no PEM certificate" + OpenSslError();
    return false;
  }
  BIO* key_bio = BIO_new_mem_buf(key.data(), static_cast<int>(key.size()));
  EVP_PKEY* pkey =
      key_bio ? PEM_read_bio_PrivateKey(key_bio, nullptr, NoPassphrase, nullptr) : nullptr;
  BIO_free(key_bio);
  ERR_clear_error();  // never quote the key's parser
  if (pkey == nullptr) {
    X509_free(x509);
    *error = "the client key file " + s.key_file +
             " holds no PEM private key, or one protected by a passphrase (not supported)";
    return false;
  }
  const bool match = X509_check_private_key(x509, pkey) == 1;
  ERR_clear_error();
  EVP_PKEY_free(pkey);
  X509_free(x509);
  if (!match) {
    *error =
        "the client key file " + s.key_file + " does not match the certificate in " + s.cert_file;
    return false;
  }
  if (!ca.empty()) {
    BIO* ca_bio = BIO_new_mem_buf(ca.data(), static_cast<int>(ca.size()));
    X509* first = ca_bio ? PEM_read_bio_X509(ca_bio, nullptr, nullptr, nullptr) : nullptr;
    BIO_free(ca_bio);
    if (first == nullptr) {
      *error = "the CA file " + s.ca_file + " holds no PEM certificate" + OpenSslError();
      return false;
    }
    X509_free(first);
  }
  ERR_clear_error();
  return true;
}

// The cause of a transfer that got no whole HTTP answer.
std::string TransportCause(CURLcode code, const std::string& message) {
  switch (code) {
    case CURLE_OPERATION_TIMEDOUT:
      return "timeout";
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ENGINE_SETFAILED:
    case CURLE_SSL_ENGINE_INITFAILED:
    case CURLE_SSL_SHUTDOWN_FAILED:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_SSL_CLIENTCERT:
    case CURLE_USE_SSL_FAILED:
      return "tls";
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
      // With TLS 1.3 the server checks the client certificate after the
      // client's handshake is done: its refusal arrives as an alert on the
      // first read ("tlsv13 alert certificate required", "... unknown ca").
      return message.find(" alert ") != std::string::npos ? "tls" : "connect";
    case CURLE_WRITE_ERROR:  // the body passed kMaxBodyBytes
    case CURLE_FILESIZE_EXCEEDED:
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_BAD_CONTENT_ENCODING:
    case CURLE_UNSUPPORTED_PROTOCOL:  // e.g. a redirect elsewhere would need it; none is followed
      return "bad_response";
    case CURLE_URL_MALFORMAT:
      return "config";
    default:
      return "connect";
  }
}

// What a problem+json (or OAuth error) body says, as a short quote; the body
// itself, cut short, when it is not JSON.
std::string Quote(const std::string& body) {
  json j = json::parse(body, nullptr, false);
  if (j.is_object()) {
    std::string out;
    auto text = [&](const char* key) -> std::string {
      auto it = j.find(key);
      return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
    };
    std::string type = text("type");
    if (const size_t slash = type.rfind('/'); slash != std::string::npos)
      type = type.substr(slash + 1);
    std::string last;
    for (const std::string& part :
         {type, text("title"), text("detail"), text("error"), text("error_description")}) {
      if (part.empty() || part == last) continue;
      if (!out.empty()) out += ": ";
      out += part;
      last = part;
    }
    if (!out.empty()) return OneLine(out, kMaxQuote);
  }
  return OneLine(body, kMaxQuote);
}

// The problem type's last segment ("CobNaoEncontrado"), "" when absent.
std::string ProblemType(const std::string& body) {
  json j = json::parse(body, nullptr, false);
  if (!j.is_object()) return "";
  auto it = j.find("type");
  if (it == j.end() || !it->is_string()) return "";
  std::string type = it->get<std::string>();
  if (const size_t slash = type.rfind('/'); slash != std::string::npos)
    type = type.substr(slash + 1);
  return type;
}

struct HttpResult {
  CURLcode code = CURLE_OK;
  std::string message;  // curl's error buffer (or its strerror) when code != CURLE_OK
  long status = 0;
  std::string body;
  std::string retry_after, location;
  bool too_large = false;
  // An alert the server sent in TLS ("unknown CA", "certificate required"),
  // "" when none (close notify does not count).
  std::string alert_in;
  std::string reset;      // curl's line about a connection reset, "" when none
  bool new_tls = false;   // this transfer made a TLS handshake of its own
  long header_bytes = 0;  // of the answer
};

// curl's informational lines (CURLINFO_TEXT) of a transfer, for the TLS
// alerts the server sent: with TLS 1.3 the server refuses a client
// certificate after the client's side of the handshake is done, and the
// connection may then fail on a reset that hides the alert from the error
// message. Headers and data (the Authorization header among them) are never
// looked at.
int DebugText(CURL*, curl_infotype type, char* data, size_t size, void* user) {
  if (type != CURLINFO_TEXT) return 0;
  auto* r = static_cast<HttpResult*>(user);
  std::string_view line(data, size);
  // OpenSSL's message trace, e.g. "TLSv1.3 (IN), TLS alert, unknown CA (560):".
  constexpr std::string_view kAlertIn = "(IN), TLS alert, ";
  const size_t at = line.find(kAlertIn);
  if (at != std::string_view::npos && r->alert_in.empty()) {
    std::string_view what = line.substr(at + kAlertIn.size());
    what = what.substr(0, what.find(" ("));
    if (what != "close notify") r->alert_in = OneLine(what, 80);
  }
  // "Send failure: Connection reset by peer": the error buffer may hold an
  // earlier, less telling line.
  if (r->reset.empty() && line.find("reset by peer") != std::string_view::npos) {
    r->reset = OneLine(line, 200);
  }
  return 0;
}

size_t WriteBody(char* data, size_t size, size_t n, void* user) {
  auto* r = static_cast<HttpResult*>(user);
  const size_t bytes = size * n;
  if (r->body.size() + bytes > kMaxBodyBytes) {
    r->too_large = true;
    return 0;  // curl stops with CURLE_WRITE_ERROR
  }
  r->body.append(data, bytes);
  return bytes;
}

std::string Header(CURL* curl, const char* name) {
  struct curl_header* h = nullptr;
  if (curl_easy_header(curl, name, 0, CURLH_HEADER, -1, &h) != CURLHE_OK || h == nullptr) return "";
  return h->value != nullptr ? h->value : "";
}

class PixApiProvider : public Provider {
 public:
  PixApiProvider(PixApiSettings settings, std::string secret, std::string cert, std::string key,
                 std::string ca, CURL* curl)
      : s_(std::move(settings)),
        secret_(std::move(secret)),
        cert_(std::move(cert)),
        key_(std::move(key)),
        ca_(std::move(ca)),
        curl_(curl) {}

  ~PixApiProvider() override {
    curl_easy_cleanup(curl_);
    WipeString(&secret_);
    WipeString(&key_);
    WipeString(&token_);
  }

  Answer Ask(const ActionInfo& action) override;

 private:
  enum class Method { kGet, kTokenPost };

  HttpResult Perform(Method method, const std::string& url, const std::string& form);
  // Fetches a token into token_; false with *answer filled when none came.
  bool FetchToken(Answer* answer);
  // An Answer for a transfer that got no whole HTTP answer.
  Answer TransportFailure(const std::string& what, const HttpResult& r);
  Answer Classify(const std::string& what, const std::string& txid, const HttpResult& r);
  // *line with the secret and the token taken out.
  void Scrub(std::string* line) const {
    Redact(line, secret_);
    Redact(line, token_);
  }

  const PixApiSettings s_;
  std::string secret_, cert_, key_, ca_;
  CURL* const curl_;  // one handle: connections (and TLS sessions) are reused across calls
  std::string token_;
  SteadyClock::time_point token_expiry_{};
};

HttpResult PixApiProvider::Perform(Method method, const std::string& url, const std::string& form) {
  HttpResult r;
  char errbuf[CURL_ERROR_SIZE] = {0};
  CURL* c = curl_;
  curl_easy_reset(c);  // keeps live connections and TLS sessions; drops the previous options
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(s_.timeout_ms));
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(s_.timeout_ms));
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, WriteBody);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
  curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(kMaxBodyBytes));
  curl_easy_setopt(c, CURLOPT_USERAGENT, "intentd-reconcile");
  curl_easy_setopt(c, CURLOPT_DEBUGFUNCTION, DebugText);
  curl_easy_setopt(c, CURLOPT_DEBUGDATA, &r);
  curl_easy_setopt(c, CURLOPT_VERBOSE, 1L);  // only to DebugText
  if (StartsWith(url, "https://")) {
    curl_easy_setopt(c, CURLOPT_SSLVERSION, static_cast<long>(CURL_SSLVERSION_TLSv1_2));
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
    // NOCOPY: curl reads the PEM text from these strings, which live as long
    // as the provider, and keeps no copy of the key of its own.
    struct curl_blob cert = {cert_.data(), cert_.size(), CURL_BLOB_NOCOPY};
    struct curl_blob key = {key_.data(), key_.size(), CURL_BLOB_NOCOPY};
    curl_easy_setopt(c, CURLOPT_SSLCERTTYPE, "PEM");
    curl_easy_setopt(c, CURLOPT_SSLCERT_BLOB, &cert);
    curl_easy_setopt(c, CURLOPT_SSLKEYTYPE, "PEM");
    curl_easy_setopt(c, CURLOPT_SSLKEY_BLOB, &key);
    if (!ca_.empty()) {
      // Only the configured CAs: neither the default bundle nor the default
      // directory of the system's.
      struct curl_blob ca = {ca_.data(), ca_.size(), CURL_BLOB_NOCOPY};
      curl_easy_setopt(c, CURLOPT_CAINFO_BLOB, &ca);
      curl_easy_setopt(c, CURLOPT_CAPATH, nullptr);
    }
  }
  struct curl_slist* headers = curl_slist_append(nullptr, "Accept: application/json");
  std::string bearer;
  if (method == Method::kTokenPost) {
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, form.c_str());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, static_cast<long>(form.size()));
    curl_easy_setopt(c, CURLOPT_HTTPAUTH, static_cast<long>(CURLAUTH_BASIC));
    curl_easy_setopt(c, CURLOPT_USERNAME, s_.client_id.c_str());
    curl_easy_setopt(c, CURLOPT_PASSWORD, secret_.c_str());
  } else {
    curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
    bearer = "Authorization: Bearer " + token_;
    headers = curl_slist_append(headers, bearer.c_str());
  }
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  r.code = curl_easy_perform(c);
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
  curl_easy_getinfo(c, CURLINFO_HEADER_SIZE, &r.header_bytes);
  curl_off_t appconnect_us = 0;
  curl_easy_getinfo(c, CURLINFO_APPCONNECT_TIME_T, &appconnect_us);
  r.new_tls = appconnect_us > 0;
  if (r.code == CURLE_OK) {
    r.retry_after = Header(c, "Retry-After");
    r.location = Header(c, "Location");
  } else {
    r.message = errbuf[0] != '\0' ? errbuf : curl_easy_strerror(r.code);
    // curl keeps its first error line, which may be a note on the way
    // ("getpeername() failed ...") rather than the failure itself.
    if (r.message.rfind("getpeername()", 0) == 0) {
      r.message = r.reset.empty() ? curl_easy_strerror(r.code) : r.reset;
    }
  }
  // Nothing of this request may outlive it in the handle: the password and
  // the header list are dropped now, not at the next reset.
  curl_easy_setopt(c, CURLOPT_PASSWORD, nullptr);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, nullptr);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, nullptr);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, nullptr);
  curl_easy_setopt(c, CURLOPT_VERBOSE, 0L);
  curl_easy_setopt(c, CURLOPT_DEBUGDATA, nullptr);
  curl_slist_free_all(headers);
  WipeString(&bearer);
  return r;
}

Answer PixApiProvider::TransportFailure(const std::string& what, const HttpResult& r) {
  Answer a;
  a.verdict = Verdict::kUnknown;
  if (r.too_large) {
    a.cause = "bad_response";
    a.detail = what + ": the answer is larger than " + std::to_string(kMaxBodyBytes) + " bytes";
  } else if (!r.alert_in.empty() && r.code != CURLE_OPERATION_TIMEDOUT) {
    a.cause = "tls";
    a.detail = what + ": the server sent the TLS alert \"" + r.alert_in +
               "\" (a refused client certificate?): " + OneLine(r.message, 200);
  } else if ((r.code == CURLE_SEND_ERROR || r.code == CURLE_RECV_ERROR) && r.new_tls &&
             r.header_bytes == 0 && !r.reset.empty()) {
    // A TLS 1.3 server that refuses the client certificate sends its alert
    // after the client's handshake is done and closes with the request
    // unread: the reset that follows can discard the alert before curl
    // reads it.
    a.cause = "tls";
    a.detail = what + ": the connection was reset right after the TLS handshake, before any " +
               "answer (a refused client certificate?): " + r.reset;
  } else {
    a.cause = TransportCause(r.code, r.message);
    a.detail = what + ": " + OneLine(r.message, 300);
  }
  a.provider_said = r.status > 0 ? std::to_string(r.status) : "no answer";
  Scrub(&a.detail);
  return a;
}

bool PixApiProvider::FetchToken(Answer* answer) {
  token_.clear();
  std::string form = "grant_type=client_credentials";
  if (!s_.scope.empty()) {
    char* escaped = curl_easy_escape(curl_, s_.scope.c_str(), static_cast<int>(s_.scope.size()));
    if (escaped != nullptr) {
      form += "&scope=";
      form += escaped;
      curl_free(escaped);
    }
  }
  const SteadyClock::time_point start = SteadyClock::now();
  const std::string what = "token request POST " + s_.token_url;
  HttpResult r = Perform(Method::kTokenPost, s_.token_url, form);
  if (r.code != CURLE_OK) {
    *answer = TransportFailure(what, r);
    return false;
  }
  auto fail = [&](const std::string& why) {
    Answer a;
    a.verdict = Verdict::kUnknown;
    a.cause = "token";
    a.provider_said = "token " + std::to_string(r.status);
    a.detail = what + ": " + why;
    a.retry_after_ms = ParseRetryAfterMs(r.retry_after, static_cast<int64_t>(std::time(nullptr)));
    Scrub(&a.detail);
    *answer = std::move(a);
    return false;
  };
  if (r.status != 200) {
    const std::string said = Quote(r.body);
    return fail(std::to_string(r.status) + (said.empty() ? "" : " " + said));
  }
  json j = json::parse(r.body, nullptr, false);
  if (!j.is_object()) return fail("200, but the answer is not a JSON object");
  auto tok = j.find("access_token");
  if (tok == j.end() || !tok->is_string() || tok->get<std::string>().empty()) {
    return fail("200, but no access_token");
  }
  const std::string& value = tok->get_ref<const std::string&>();
  for (unsigned char ch : value) {
    if (ch <= 0x20 || ch >= 0x7f)
      return fail("200, but the access_token holds characters a header cannot carry");
  }
  if (auto type = j.find("token_type"); type != j.end()) {
    std::string t = type->is_string() ? type->get<std::string>() : "";
    std::transform(t.begin(), t.end(), t.begin(),
                   [](unsigned char ch) { return std::tolower(ch); });
    if (t != "bearer") return fail("200, but the token_type is not Bearer");
  }
  int64_t lifetime_s = 60;
  if (auto exp = j.find("expires_in"); exp != j.end()) {
    if (exp->is_number()) {
      lifetime_s = static_cast<int64_t>(exp->get<double>());
    } else if (exp->is_string() && !exp->get<std::string>().empty() &&
               exp->get<std::string>().size() < 10 &&
               std::all_of(exp->get<std::string>().begin(), exp->get<std::string>().end(),
                           [](unsigned char ch) { return std::isdigit(ch); })) {
      lifetime_s = std::stoll(exp->get<std::string>());
    }
  }
  const int64_t margin_s = lifetime_s >= 120 ? 60 : lifetime_s / 2;
  token_ = value;
  token_expiry_ = start + std::chrono::seconds(lifetime_s - margin_s);
  return true;
}

Answer PixApiProvider::Classify(const std::string& what, const std::string& txid,
                                const HttpResult& r) {
  Answer a;
  a.verdict = Verdict::kUnknown;
  a.provider_said = std::to_string(r.status);
  a.retry_after_ms = ParseRetryAfterMs(r.retry_after, static_cast<int64_t>(std::time(nullptr)));
  const std::string said = Quote(r.body);
  const std::string status_line =
      what + ": " + std::to_string(r.status) + (said.empty() ? "" : " " + said);
  if (r.status == 200) {
    json charge = json::parse(r.body, nullptr, false);
    std::string status;
    if (charge.is_object()) {
      auto it = charge.find("status");
      if (it != charge.end() && it->is_string()) status = it->get<std::string>();
    }
    const bool known = std::any_of(std::begin(kChargeStatuses), std::end(kChargeStatuses),
                                   [&](const char* s) { return status == s; });
    auto echoed = charge.is_object() ? charge.find("txid") : charge.end();
    if (!charge.is_object()) {
      a.cause = "bad_response";
      a.detail = what + ": 200, but the answer is not a JSON object";
    } else if (!known) {
      a.cause = "bad_response";
      a.detail =
          what + ": 200, but the charge's status is " +
          (status.empty() ? std::string("missing") : "\"" + OneLine(status, 40) + "\"") +
          " (expected ATIVA, CONCLUIDA, REMOVIDA_PELO_USUARIO_RECEBEDOR or REMOVIDA_PELO_PSP)";
    } else if (echoed != charge.end() &&
               (!echoed->is_string() || echoed->get<std::string>() != txid)) {
      a.cause = "bad_response";
      a.detail = what + ": 200, but the charge is another txid's";
    } else {
      a.verdict = Verdict::kExecuted;
      a.response = charge.dump(-1, ' ', false, json::error_handler_t::replace);
      a.provider_said = "200 " + status;
      a.detail = what + ": 200, the charge exists with status " + status;
    }
  } else if (r.status == 404) {
    const std::string type = ProblemType(r.body);
    if (type == "CobNaoEncontrado") {
      a.verdict = Verdict::kNotExecuted;
      a.error = json{{"reconciled", "not_found"}, {"provider", "pix_api"}, {"status", 404}}.dump();
      a.detail = what + ": 404 CobNaoEncontrado, the PSP has no charge with this txid";
    } else {
      a.cause = "http_4xx";
      a.detail = status_line +
                 " (a 404 without the problem type CobNaoEncontrado is not taken as \"no such "
                 "charge\": check base_url)";
    }
  } else if (r.status == 401) {
    a.cause = "http_401";
    a.detail = status_line + " (also with a new token)";
  } else if (r.status == 403) {
    a.cause = "http_403";
    a.detail = status_line;
  } else if (r.status == 429) {
    a.cause = "http_429";
    a.detail = status_line;
  } else if (r.status >= 400 && r.status < 500) {
    a.cause = "http_4xx";
    a.detail = status_line;
  } else if (r.status >= 500 && r.status < 600) {
    a.cause = "http_5xx";
    a.detail = status_line;
  } else if (r.status >= 300 && r.status < 400) {
    a.cause = "bad_response";
    a.detail = what + ": " + std::to_string(r.status) + ", a redirect" +
               (r.location.empty() ? "" : " to " + OneLine(r.location, kMaxQuote)) +
               " (not followed: base_url should name the API itself)";
  } else {
    a.cause = "bad_response";
    a.detail = status_line + " (expected 200 or 404)";
  }
  if (a.retry_after_ms > 0 && a.verdict == Verdict::kUnknown) {
    a.detail += " (Retry-After " + std::to_string((a.retry_after_ms + 999) / 1000) + " s)";
  }
  Scrub(&a.detail);
  return a;
}

Answer PixApiProvider::Ask(const ActionInfo& action) {
  if (action.txid.empty()) {
    Answer a;
    a.cause = "config";
    a.detail = "the action has no txid: the API Pix is asked about a charge by its txid";
    return a;
  }
  ScopedSigpipeBlock no_sigpipe;
  char* escaped =
      curl_easy_escape(curl_, action.txid.c_str(), static_cast<int>(action.txid.size()));
  if (escaped == nullptr) {
    Answer a;
    a.cause = "config";
    a.detail = "cannot percent-encode the txid";
    return a;
  }
  const std::string url = s_.base_url + "/cob/" + escaped;
  curl_free(escaped);
  const std::string what = "GET " + url;
  for (int attempt = 0;; ++attempt) {
    if (token_.empty() || SteadyClock::now() >= token_expiry_) {
      Answer failed;
      if (!FetchToken(&failed)) return failed;
    }
    HttpResult r = Perform(Method::kGet, url, "");
    if (r.code != CURLE_OK) return TransportFailure(what, r);
    if (r.status == 401 && attempt == 0) {
      WipeString(&token_);  // revoked or expired early: one new token, one more try
      continue;
    }
    return Classify(what, action.txid, r);
  }
}

}  // namespace

int64_t ParseRetryAfterMs(const std::string& value, int64_t now) {
  size_t b = 0, e = value.size();
  while (b < e && std::isspace(static_cast<unsigned char>(value[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(value[e - 1]))) --e;
  const std::string v = value.substr(b, e - b);
  if (v.empty()) return 0;
  if (std::all_of(v.begin(), v.end(), [](unsigned char c) { return std::isdigit(c); })) {
    if (v.size() > 9) return kMaxRetryAfterMs;
    return std::min<int64_t>(std::stoll(v) * 1000, kMaxRetryAfterMs);
  }
  const time_t when = curl_getdate(v.c_str(), nullptr);
  if (when == static_cast<time_t>(-1) || when <= now) return 0;
  return std::min<int64_t>((static_cast<int64_t>(when) - now) * 1000, kMaxRetryAfterMs);
}

std::unique_ptr<Provider> MakePixApiProvider(const PixApiSettings& settings, std::string* error) {
  if (!InitCurl(error)) return nullptr;
  std::string secret, cert, key, ca;
  if (!ReadWholeFile(settings.client_secret_file, "the client secret file", true, kMaxSecretBytes,
                     &secret, error)) {
    return nullptr;
  }
  if (!secret.empty() && secret.back() == '\n') secret.pop_back();
  if (!secret.empty() && secret.back() == '\r') secret.pop_back();
  if (secret.empty()) {
    *error = "the client secret file " + settings.client_secret_file + " is empty";
    return nullptr;
  }
  if (secret.find('\0') != std::string::npos) {
    WipeString(&secret);
    *error = "the client secret file " + settings.client_secret_file + " holds a NUL byte";
    return nullptr;
  }
  const bool tls = !settings.cert_file.empty();
  if (tls) {
    if (!ReadWholeFile(settings.cert_file, "the client certificate file", false, kMaxCertBytes,
                       &cert, error) ||
        !ReadWholeFile(settings.key_file, "the client key file", true, kMaxKeyBytes, &key, error) ||
        (!settings.ca_file.empty() &&
         !ReadWholeFile(settings.ca_file, "the CA file", false, kMaxCaBytes, &ca, error)) ||
        !CheckPem(settings, cert, key, ca, error)) {
      WipeString(&secret);
      WipeString(&key);
      return nullptr;
    }
  }
  CURL* curl = curl_easy_init();
  if (curl == nullptr) {
    WipeString(&secret);
    WipeString(&key);
    *error = "cannot create a libcurl handle";
    return nullptr;
  }
  PixApiSettings s = settings;
  while (s.base_url.size() > 1 && s.base_url.back() == '/') s.base_url.pop_back();
  return std::make_unique<PixApiProvider>(std::move(s), std::move(secret), std::move(cert),
                                          std::move(key), std::move(ca), curl);
}

}  // namespace intentd::reconcile
