// The reconcile providers against the API Pix test server
// (tests/reconcile/pix_server.py, over mutual TLS with a PKI made here, and
// over plain HTTP), and the command hook against small shell scripts.
#include "reconcile/provider.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "reconcile/config.h"
#include "reconcile/pix_api.h"

namespace intentd::reconcile {
namespace {

using nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

constexpr char kPython[] = "/usr/bin/python3";
constexpr char kSecret[] = "s3cret-do-not-print-7f2c";
constexpr char kClientId[] = "intentd";
// Valid API Pix txids ([a-zA-Z0-9]{26,35}).
constexpr char kTxid[] = "intentdTest0000000000000000000001";
constexpr char kOtherTxid[] = "intentdTest0000000000000000000002";

std::string SourceDir() { return INTENTD_SOURCE_DIR; }

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteFile(const std::string& path, const std::string& text, mode_t mode) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
  ::chmod(path.c_str(), mode);
}

class TempDir {
 public:
  TempDir() {
    std::string tmpl =
        (std::filesystem::temp_directory_path() / "intentd-reconcile-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) std::abort();
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// --- a small libcurl client for the test's own requests -----------------------

struct Reply {
  long status = 0;
  std::string body;
  std::string error;  // curl's, when the request failed
};

size_t Collect(char* data, size_t size, size_t n, void* user) {
  static_cast<std::string*>(user)->append(data, size * n);
  return size * n;
}

struct Request {
  std::string method = "GET", url, body, unix_socket, bearer, basic_user, basic_password;
  std::string cert, key, ca;  // files, for https
};

Reply Send(const Request& q) {
  Reply r;
  CURL* c = curl_easy_init();
  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(c, CURLOPT_URL, q.url.c_str());
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 10000L);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, Collect);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &r.body);
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, q.method.c_str());
  if (!q.unix_socket.empty()) curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, q.unix_socket.c_str());
  if (!q.cert.empty()) {
    curl_easy_setopt(c, CURLOPT_SSLCERT, q.cert.c_str());
    curl_easy_setopt(c, CURLOPT_SSLKEY, q.key.c_str());
    curl_easy_setopt(c, CURLOPT_CAINFO, q.ca.c_str());
  }
  struct curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
  std::string auth;
  if (!q.bearer.empty()) {
    auth = "Authorization: Bearer " + q.bearer;
    headers = curl_slist_append(headers, auth.c_str());
  }
  if (!q.basic_user.empty()) {
    curl_easy_setopt(c, CURLOPT_HTTPAUTH, static_cast<long>(CURLAUTH_BASIC));
    curl_easy_setopt(c, CURLOPT_USERNAME, q.basic_user.c_str());
    curl_easy_setopt(c, CURLOPT_PASSWORD, q.basic_password.c_str());
    curl_slist_free_all(headers);
    headers = curl_slist_append(nullptr, "Content-Type: application/x-www-form-urlencoded");
  }
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  if (q.method != "GET") {
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, q.body.c_str());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, static_cast<long>(q.body.size()));
  }
  CURLcode code = curl_easy_perform(c);
  if (code != CURLE_OK) r.error = errbuf[0] ? errbuf : curl_easy_strerror(code);
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
  curl_slist_free_all(headers);
  curl_easy_cleanup(c);
  return r;
}

// --- the API Pix test server --------------------------------------------------

class PixServer {
 public:
  // Starts pix_server.py with the PKI in `dir`; false with *error when it
  // did not come up.
  bool Start(const std::string& dir, const std::string& name, bool plain, std::string* error) {
    dir_ = dir;
    plain_ = plain;
    control_ = dir + "/" + name + ".sock";
    log_ = dir + "/" + name + ".log";
    const std::string port_file = dir + "/" + name + ".port";
    std::vector<std::string> args = {kPython,
                                     SourceDir() + "/tests/reconcile/pix_server.py",
                                     "--port",
                                     "0",
                                     "--port-file",
                                     port_file,
                                     "--client-id",
                                     kClientId,
                                     "--client-secret-file",
                                     dir + "/secret",
                                     "--control-socket",
                                     control_};
    if (plain) {
      args.push_back("--plain-http");
    } else {
      for (const char* a :
           {"--cert", "server.pem", "--key", "server.key", "--client-ca", "ca.pem"}) {
        args.push_back(a[0] == '-' ? std::string(a) : dir + "/" + a);
      }
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int log_fd = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(log_fd, 2);
      ::setenv("PYTHONDONTWRITEBYTECODE", "1", 1);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(log_fd);
    const auto deadline = SteadyClock::now() + std::chrono::seconds(15);
    while (SteadyClock::now() < deadline) {
      std::string text = ReadFile(port_file);
      if (!text.empty() && text.back() == '\n' && access(control_.c_str(), F_OK) == 0) {
        port_ = std::stoi(text);
        return true;
      }
      int status;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        *error = "pix_server.py exited: " + ReadFile(log_);
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    *error = "pix_server.py did not write its port file: " + ReadFile(log_);
    return false;
  }

  ~PixServer() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      int status;
      ::waitpid(pid_, &status, 0);
    }
  }

  std::string url() const {
    return std::string(plain_ ? "http" : "https") + "://127.0.0.1:" + std::to_string(port_);
  }
  std::string Log() const { return ReadFile(log_); }

  json Control(const std::string& method, const std::string& path, const json& body = nullptr) {
    Request q;
    q.method = method;
    q.url = "http://x" + path;
    q.unix_socket = control_;
    q.body = body.is_null() ? "" : body.dump();
    Reply r = Send(q);
    EXPECT_EQ(r.status, 200) << method << " " << path << ": " << r.error << r.body;
    return json::parse(r.body, nullptr, false);
  }
  json State() { return Control("GET", "/state"); }
  void Reset() { Control("POST", "/reset"); }
  void Fault(const json& rule) { Control("POST", "/faults", rule); }

  // Creates a charge the way a bot would: a token, then PUT /cob/{txid}.
  void CreateCharge(const std::string& txid) {
    Request t;
    t.method = "POST";
    t.url = url() + "/oauth/token";
    t.body = "grant_type=client_credentials";
    t.basic_user = kClientId;
    t.basic_password = kSecret;
    TlsFiles(&t);
    Reply token = Send(t);
    ASSERT_EQ(token.status, 200) << token.error << token.body;
    Request put;
    put.method = "PUT";
    put.url = url() + "/cob/" + txid;
    put.bearer = json::parse(token.body)["access_token"];
    put.body = json{{"calendario", {{"expiracao", 3600}}},
                    {"devedor", {{"cpf", "11144477735"}, {"nome", "Fulano de Tal"}}},
                    {"valor", {{"original", "180.00"}}},
                    {"chave", "11144477735"},
                    {"solicitacaoPagador", "FAT-2026-000123"}}
                   .dump();
    TlsFiles(&put);
    Reply created = Send(put);
    ASSERT_EQ(created.status, 201) << created.error << created.body;
  }

 private:
  void TlsFiles(Request* q) const {
    if (plain_) return;
    q->cert = dir_ + "/client.pem";
    q->key = dir_ + "/client.key";
    q->ca = dir_ + "/ca.pem";
  }

  std::string dir_, control_, log_;
  bool plain_ = false;
  pid_t pid_ = -1;
  int port_ = 0;
};

// Makes the PKI and the secret file in `dir`; "" or what failed.
std::string MakePki(const std::string& dir) {
  const std::string cmd = "bash " + SourceDir() + "/tests/reconcile/make_test_pki.sh " + dir;
  if (std::system(cmd.c_str()) != 0) return "make_test_pki.sh failed";
  WriteFile(dir + "/secret", std::string(kSecret) + "\n", 0600);
  return "";
}

std::string Missing() {
  if (access(kPython, X_OK) != 0) return "no /usr/bin/python3";
  if (std::system("command -v openssl >/dev/null 2>&1") != 0) return "no openssl command";
  return "";
}

ActionInfo Action(const std::string& txid) {
  ActionInfo a;
  a.tenant_id = "acme";
  a.key = "k1";
  a.txid = txid;
  a.action_type = "pix.cobranca";
  a.intent_ref = "FAT-2026-000123";
  a.record_json = json{{"tenant_id", "acme"}, {"key", "k1"}, {"status", "uncertain"}}.dump();
  return a;
}

// The API Pix over mutual TLS: one server for the suite, reset before each test.
class ProviderPixApi : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    error_.clear();
    skip_ = Missing();
    if (!skip_.empty()) return;
    dir_ = new TempDir();
    error_ = MakePki(dir_->path());
    if (!error_.empty()) return;
    server_ = new PixServer();
    server_->Start(dir_->path(), "tls", false, &error_);
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << skip_;
    ASSERT_EQ(error_, "");
    server_->Reset();
  }

  static std::string File(const std::string& name) { return dir_->path() + "/" + name; }

  static PixApiSettings Settings() {
    PixApiSettings s;
    s.base_url = server_->url();
    s.token_url = server_->url() + "/oauth/token";
    s.client_id = kClientId;
    s.client_secret_file = File("secret");
    s.cert_file = File("client.pem");
    s.key_file = File("client.key");
    s.ca_file = File("ca.pem");
    s.timeout_ms = 5000;
    return s;
  }

  static std::unique_ptr<Provider> Make(const PixApiSettings& s) {
    TypeSettings t;
    t.action_type = "pix.cobranca";
    t.pix_api = s;
    std::string error;
    auto p = MakeProvider(t, &error);
    EXPECT_NE(p, nullptr) << error;
    return p;
  }

  static Answer AskOnce(const PixApiSettings& s, const std::string& txid) {
    auto p = Make(s);
    return p ? p->Ask(Action(txid)) : Answer{};
  }

  // Every answer, whatever it says, keeps the secret out of what it shows.
  static void ExpectNoSecret(const Answer& a) {
    for (const std::string* field :
         {&a.detail, &a.provider_said, &a.error, &a.response, &a.cause}) {
      EXPECT_EQ(field->find(kSecret), std::string::npos) << *field;
    }
  }

  static int Count(const json& state, const std::string& request) {
    return state["requests"].value(request, 0);
  }

  static inline std::string skip_, error_;
  static inline TempDir* dir_ = nullptr;
  static inline PixServer* server_ = nullptr;
};

TEST_F(ProviderPixApi, AnExistingChargeIsExecutedWithTheChargeAsTheResponse) {
  server_->CreateCharge(kTxid);
  Answer a = AskOnce(Settings(), kTxid);
  ASSERT_EQ(a.verdict, Verdict::kExecuted) << a.detail;
  json charge = json::parse(a.response);
  EXPECT_EQ(charge["txid"], kTxid);
  EXPECT_EQ(charge["status"], "ATIVA");
  EXPECT_EQ(charge["valor"]["original"], "180.00");
  EXPECT_EQ(a.response, charge.dump()) << "compact JSON";
  EXPECT_EQ(a.provider_said, "200 ATIVA");
  EXPECT_EQ(a.cause, "");
  ExpectNoSecret(a);
}

TEST_F(ProviderPixApi, EveryChargeStatusMeansTheChargeWasCreated) {
  server_->CreateCharge(kTxid);
  auto p = Make(Settings());
  for (const char* status :
       {"CONCLUIDA", "REMOVIDA_PELO_USUARIO_RECEBEDOR", "REMOVIDA_PELO_PSP", "ATIVA"}) {
    server_->Control("POST", std::string("/charges/") + kTxid + "/status", {{"status", status}});
    Answer a = p->Ask(Action(kTxid));
    ASSERT_EQ(a.verdict, Verdict::kExecuted) << status << ": " << a.detail;
    EXPECT_EQ(a.provider_said, std::string("200 ") + status);
    json charge = json::parse(a.response);
    EXPECT_EQ(charge["status"], status);
    if (std::string(status) == "CONCLUIDA") {
      EXPECT_EQ(charge["pix"][0]["txid"], kTxid);
    }
  }
}

TEST_F(ProviderPixApi, NoSuchChargeIsNotExecuted) {
  server_->CreateCharge(kOtherTxid);
  Answer a = AskOnce(Settings(), kTxid);
  ASSERT_EQ(a.verdict, Verdict::kNotExecuted) << a.detail;
  EXPECT_EQ(a.error, R"({"provider":"pix_api","reconciled":"not_found","status":404})");
  EXPECT_EQ(json::parse(a.error),
            json({{"reconciled", "not_found"}, {"provider", "pix_api"}, {"status", 404}}));
  EXPECT_EQ(a.provider_said, "404");
}

TEST_F(ProviderPixApi, A404FromAWrongBaseUrlIsUnknown) {
  PixApiSettings s = Settings();
  s.base_url += "/api/v2";  // the server serves /cob/ at the root: 404 NaoEncontrado
  Answer a = AskOnce(s, kTxid);
  EXPECT_EQ(a.verdict, Verdict::kUnknown);
  EXPECT_EQ(a.cause, "http_4xx");
  EXPECT_NE(a.detail.find("base_url"), std::string::npos) << a.detail;
}

TEST_F(ProviderPixApi, TheTokenIsKeptAcrossCalls) {
  server_->CreateCharge(kTxid);
  const int before = server_->State()["tokens_issued"];
  auto p = Make(Settings());
  for (int i = 0; i < 3; ++i) EXPECT_EQ(p->Ask(Action(kTxid)).verdict, Verdict::kExecuted);
  EXPECT_EQ(p->Ask(Action(kOtherTxid)).verdict, Verdict::kNotExecuted);
  json state = server_->State();
  EXPECT_EQ(state["tokens_issued"].get<int>() - before, 1);
  EXPECT_EQ(Count(state, "GET /cob/{txid}"), 4);
  EXPECT_EQ(Count(state, "POST /oauth/token"), 2);  // the test's own, and the provider's
}

TEST_F(ProviderPixApi, ARevokedTokenIsReplacedOnce) {
  server_->CreateCharge(kTxid);
  const int before = server_->State()["tokens_issued"];
  auto p = Make(Settings());
  ASSERT_EQ(p->Ask(Action(kTxid)).verdict, Verdict::kExecuted);
  server_->Control("POST", "/tokens/revoke");
  Answer a = p->Ask(Action(kTxid));
  EXPECT_EQ(a.verdict, Verdict::kExecuted) << a.detail;
  json state = server_->State();
  EXPECT_EQ(state["tokens_issued"].get<int>() - before, 2);
  EXPECT_EQ(Count(state, "GET /cob/{txid}"), 3);  // 200, 401, 200
}

TEST_F(ProviderPixApi, APersistent401IsHttp401AfterOneNewToken) {
  server_->Fault({{"path", "/cob/"}, {"method", "GET"}, {"fault", "status"}, {"status", 401}});
  const int before = server_->State()["tokens_issued"];
  Answer a = AskOnce(Settings(), kTxid);
  EXPECT_EQ(a.verdict, Verdict::kUnknown);
  EXPECT_EQ(a.cause, "http_401");
  EXPECT_EQ(a.provider_said, "401");
  json state = server_->State();
  EXPECT_EQ(state["tokens_issued"].get<int>() - before, 2);
  EXPECT_EQ(Count(state, "GET /cob/{txid}"), 2);
  ExpectNoSecret(a);
}

TEST_F(ProviderPixApi, ATokenEndpointRefusalIsToken) {
  server_->Fault({{"fault", "token_401"}});
  Answer a = AskOnce(Settings(), kTxid);
  EXPECT_EQ(a.verdict, Verdict::kUnknown);
  EXPECT_EQ(a.cause, "token");
  EXPECT_EQ(a.provider_said, "token 401");
  EXPECT_NE(a.detail.find("invalid_client"), std::string::npos) << a.detail;
  EXPECT_EQ(Count(server_->State(), "GET /cob/{txid}"), 0);
  ExpectNoSecret(a);
}

TEST_F(ProviderPixApi, AWrongSecretIsTokenAndIsNotShown) {
  WriteFile(File("wrong-secret"), "not-the-secret-9c1e\n", 0600);
  PixApiSettings s = Settings();
  s.client_secret_file = File("wrong-secret");
  Answer a = AskOnce(s, kTxid);
  EXPECT_EQ(a.cause, "token");
  EXPECT_EQ(a.detail.find("not-the-secret-9c1e"), std::string::npos) << a.detail;
}

TEST_F(ProviderPixApi, ServerErrorsAreUnknownWithTheirCauseAndRetryAfter) {
  server_->CreateCharge(kTxid);
  char date[64];
  const time_t later = std::time(nullptr) + 120;
  struct tm tm;
  gmtime_r(&later, &tm);
  strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
  struct Case {
    json rule;
    std::string cause, said;
    int64_t min_retry_ms, max_retry_ms;
  };
  const Case cases[] = {
      {{{"status", 500}}, "http_5xx", "500", 0, 0},
      {{{"status", 503}, {"retry_after", "7"}}, "http_5xx", "503", 7000, 7000},
      {{{"status", 429}, {"retry_after", date}}, "http_429", "429", 100000, 121000},
      {{{"status", 403}}, "http_403", "403", 0, 0},
      {{{"status", 400}}, "http_4xx", "400", 0, 0},
      {{{"status", 302}}, "bad_response", "302", 0, 0},
      {{{"status", 204}}, "bad_response", "204", 0, 0},
  };
  auto p = Make(Settings());
  for (const Case& c : cases) {
    json rule = c.rule;
    rule.update({{"path", "/cob/"}, {"method", "GET"}, {"fault", "status"}, {"times", 1}});
    server_->Fault(rule);
    Answer a = p->Ask(Action(kTxid));
    EXPECT_EQ(a.verdict, Verdict::kUnknown) << rule.dump();
    EXPECT_EQ(a.cause, c.cause) << rule.dump() << ": " << a.detail;
    EXPECT_EQ(a.provider_said, c.said) << rule.dump();
    EXPECT_GE(a.retry_after_ms, c.min_retry_ms) << rule.dump();
    EXPECT_LE(a.retry_after_ms, c.max_retry_ms) << rule.dump();
    EXPECT_FALSE(a.detail.empty());
  }
  // The same provider goes on once the provider recovers.
  EXPECT_EQ(p->Ask(Action(kTxid)).verdict, Verdict::kExecuted);
}

TEST_F(ProviderPixApi, NoAnswerWithinTimeoutMsIsTimeout) {
  server_->CreateCharge(kTxid);
  server_->Fault({{"path", "/cob/"}, {"method", "GET"}, {"fault", "timeout"}, {"seconds", 10}});
  PixApiSettings s = Settings();
  s.timeout_ms = 300;
  auto p = Make(s);
  const auto start = SteadyClock::now();
  Answer a = p->Ask(Action(kTxid));
  const auto took = SteadyClock::now() - start;
  EXPECT_EQ(a.verdict, Verdict::kUnknown);
  EXPECT_EQ(a.cause, "timeout") << a.detail;
  EXPECT_EQ(a.provider_said, "no answer");
  EXPECT_LT(took, std::chrono::seconds(3));
}

TEST_F(ProviderPixApi, ASilentTokenEndpointIsTimeoutToo) {
  // (A timeout fault, not a slow one: a slow answer would issue a token later,
  // into the next test's counts.)
  server_->Fault({{"path", "/oauth/token"}, {"fault", "timeout"}, {"seconds", 10}});
  PixApiSettings s = Settings();
  s.timeout_ms = 300;
  Answer a = AskOnce(s, kTxid);
  EXPECT_EQ(a.cause, "timeout") << a.detail;
  EXPECT_NE(a.detail.find("token"), std::string::npos) << a.detail;
}

TEST_F(ProviderPixApi, HalfAJsonBodyIsBadResponse) {
  server_->CreateCharge(kTxid);
  server_->Fault({{"path", "/cob/"}, {"method", "GET"}, {"fault", "bad_json"}});
  Answer a = AskOnce(Settings(), kTxid);
  EXPECT_EQ(a.verdict, Verdict::kUnknown);
  EXPECT_EQ(a.cause, "bad_response") << a.detail;
}

TEST_F(ProviderPixApi, AClosedConnectionIsConnect) {
  server_->CreateCharge(kTxid);
  server_->Fault({{"path", "/cob/"}, {"method", "GET"}, {"fault", "close"}});
  Answer a = AskOnce(Settings(), kTxid);
  EXPECT_EQ(a.verdict, Verdict::kUnknown);
  EXPECT_EQ(a.cause, "connect") << a.detail;
}

TEST_F(ProviderPixApi, NothingListeningIsConnect) {
  PixApiSettings s = Settings();
  s.base_url = "https://127.0.0.1:1";
  s.token_url = "https://127.0.0.1:1/oauth/token";
  Answer a = AskOnce(s, kTxid);
  EXPECT_EQ(a.cause, "connect") << a.detail;
}

TEST_F(ProviderPixApi, AServerCertificateFromAnotherCaIsTls) {
  PixApiSettings s = Settings();
  s.ca_file = File("rogue-ca.pem");
  Answer a = AskOnce(s, kTxid);
  EXPECT_EQ(a.verdict, Verdict::kUnknown);
  EXPECT_EQ(a.cause, "tls") << a.detail;
}

TEST_F(ProviderPixApi, AClientCertificateTheServerDoesNotTrustIsTls) {
  PixApiSettings s = Settings();
  s.cert_file = File("rogue-client.pem");
  s.key_file = File("rogue-client.key");
  Answer a = AskOnce(s, kTxid);
  EXPECT_EQ(a.verdict, Verdict::kUnknown);
  EXPECT_EQ(a.cause, "tls") << a.detail;
  EXPECT_EQ(Count(server_->State(), "POST /oauth/token"), 0);
}

TEST_F(ProviderPixApi, AnActionWithoutTxidIsConfig) {
  Answer a = AskOnce(Settings(), "");
  EXPECT_EQ(a.verdict, Verdict::kUnknown);
  EXPECT_EQ(a.cause, "config");
}

TEST_F(ProviderPixApi, TheTxidIsPercentEncoded) {
  Answer a = AskOnce(Settings(), "../oauth/token?x=1");
  // The server sees one malformed txid (400 CobConsultaInvalida), not another path.
  EXPECT_EQ(a.cause, "http_4xx") << a.detail;
  EXPECT_EQ(a.provider_said, "400");
  EXPECT_EQ(Count(server_->State(), "POST /oauth/token"), 1);
}

TEST_F(ProviderPixApi, UnreadableOrUnsafeFilesAreRefusedAtStartup) {
  struct Case {
    std::string what;
    std::function<void(PixApiSettings*)> change;
    std::string expect;  // in the error
  };
  const std::string shared_key = File("shared.key");
  WriteFile(shared_key, ReadFile(File("client.key")), 0644);
  const std::string shared_secret = File("shared-secret");
  WriteFile(shared_secret, std::string(kSecret) + "\n", 0640);
  WriteFile(File("empty-secret"), "\n", 0600);
  WriteFile(File("not-pem.pem"), "hello\n", 0644);
  const Case cases[] = {
      {"no secret file", [&](auto* s) { s->client_secret_file = File("nope"); }, File("nope")},
      {"group-readable secret", [&](auto* s) { s->client_secret_file = shared_secret; },
       "chmod 600 " + shared_secret},
      {"empty secret", [&](auto* s) { s->client_secret_file = File("empty-secret"); }, "is empty"},
      {"world-readable key", [&](auto* s) { s->key_file = shared_key; }, "chmod 600 " + shared_key},
      {"key of another certificate", [&](auto* s) { s->key_file = File("rogue-client.key"); },
       "does not match"},
      {"no certificate", [&](auto* s) { s->cert_file = File("not-pem.pem"); },
       "no PEM certificate"},
      {"no CA", [&](auto* s) { s->ca_file = File("not-pem.pem"); }, "the CA file"},
      {"no key", [&](auto* s) { s->key_file = File("nope.key"); }, File("nope.key")},
  };
  for (const Case& c : cases) {
    PixApiSettings s = Settings();
    c.change(&s);
    TypeSettings t;
    t.action_type = "pix.cobranca";
    t.pix_api = s;
    std::string error;
    EXPECT_EQ(MakeProvider(t, &error), nullptr) << c.what;
    EXPECT_NE(error.find(c.expect), std::string::npos) << c.what << ": " << error;
    EXPECT_EQ(error.rfind("reconcile.pix.cobranca: ", 0), 0u) << error;
    EXPECT_EQ(error.find(kSecret), std::string::npos) << error;
    EXPECT_EQ(error.find("BEGIN"), std::string::npos) << error;
  }
}

// The API Pix over plain HTTP (tests, or a PSP's sandbox behind a local proxy).
class ProviderPixApiPlain : public ProviderPixApi {
 protected:
  static void SetUpTestSuite() {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    error_.clear();
    skip_ = Missing();
    if (!skip_.empty()) return;
    dir_ = new TempDir();
    WriteFile(dir_->path() + "/secret", std::string(kSecret) + "\n", 0600);
    server_ = new PixServer();
    server_->Start(dir_->path(), "plain", true, &error_);
  }
  static PixApiSettings PlainSettings() {
    PixApiSettings s;
    s.base_url = server_->url() + "/";
    s.token_url = server_->url() + "/oauth/token";
    s.client_id = kClientId;
    s.client_secret_file = File("secret");
    s.scope = "cob.read";
    return s;
  }
};

TEST_F(ProviderPixApiPlain, AnswersLikeOverTls) {
  server_->CreateCharge(kTxid);
  auto p = Make(PlainSettings());
  Answer a = p->Ask(Action(kTxid));
  ASSERT_EQ(a.verdict, Verdict::kExecuted) << a.detail;
  EXPECT_EQ(json::parse(a.response)["txid"], kTxid);
  EXPECT_EQ(a.detail.find("//cob"), std::string::npos)
      << "base_url's trailing / dropped: " << a.detail;
  EXPECT_EQ(p->Ask(Action(kOtherTxid)).verdict, Verdict::kNotExecuted);
  json state = server_->State();
  EXPECT_EQ(Count(state, "GET /cob/{txid}"), 2);
}

TEST_F(ProviderPixApiPlain, AScopeTheTokenLacksIsHttp403) {
  PixApiSettings s = PlainSettings();
  s.scope = "cob.write";  // the server then refuses GET /cob with 403
  Answer a = AskOnce(s, kTxid);
  EXPECT_EQ(a.cause, "http_403") << a.detail;
}

// --- the command hook ---------------------------------------------------------

class ProviderCommand : public ::testing::Test {
 protected:
  // A /bin/sh script in the test's directory. The hooks run it as
  // /bin/sh SCRIPT ARGS ($0 is the script, $1 the first argument), which
  // works where the temporary directory is mounted noexec.
  std::string Script(const std::string& name, const std::string& body) {
    const std::string path = dir_.path() + "/" + name;
    WriteFile(path, "#!/bin/sh\n" + body, 0755);
    return path;
  }
  std::unique_ptr<Provider> Make(std::vector<std::string> argv, int64_t timeout_ms = 5000) {
    TypeSettings t;
    t.action_type = "boleto.cobranca";
    t.command = CommandSettings{std::move(argv), timeout_ms};
    std::string error;
    auto p = MakeProvider(t, &error);
    EXPECT_NE(p, nullptr) << error;
    return p;
  }
  Answer Run(const std::string& body, int64_t timeout_ms = 5000) {
    auto p = Make({"/bin/sh", Script("hook.sh", body)}, timeout_ms);
    return p ? p->Ask(Record()) : Answer{};
  }
  static ActionInfo Record() {
    ActionInfo a;
    a.tenant_id = "acme";
    a.key = "k1";
    a.action_type = "boleto.cobranca";
    a.intent_ref = "FAT-1";
    a.record_json = R"({"tenant_id": "acme",
      "key": "k1", "payload": {"valor": "10.00", "nome": "Jo\u00e3o"}})";
    return a;
  }
  TempDir dir_;
};

TEST_F(ProviderCommand, CompletedIsExecutedAndTheHookGetsTheRecordOnOneLine) {
  const std::string got = dir_.path() + "/stdin";
  auto p = Make({"/bin/sh",
                 Script("hook.sh",
                        "cat > \"$1\"\n"
                        "printf '%s\\n' \"$2\" >> \"$1\"\n"
                        "echo '{\"outcome\":\"completed\",\"response\":{\"id\": \"b1\"},"
                        "\"detail\":\"found it\"}'\n"),
                 got, "second arg"});
  Answer a = p->Ask(Record());
  ASSERT_EQ(a.verdict, Verdict::kExecuted) << a.detail;
  EXPECT_EQ(a.response, R"({"id":"b1"})");
  EXPECT_EQ(a.provider_said, "command: completed");
  EXPECT_NE(a.detail.find("found it"), std::string::npos) << a.detail;
  EXPECT_EQ(ReadFile(got), json::parse(Record().record_json).dump() + "\nsecond arg\n");
}

TEST_F(ProviderCommand, CompletedWithoutResponseStoresNull) {
  Answer a = Run("echo '{\"outcome\":\"completed\"}'\n");
  ASSERT_EQ(a.verdict, Verdict::kExecuted) << a.detail;
  EXPECT_EQ(a.response, "null");
}

TEST_F(ProviderCommand, FailedCarriesTheError) {
  Answer a = Run("echo '{\"outcome\":\"failed\",\"error\":{\"code\":\"saldo\"}}'\n");
  ASSERT_EQ(a.verdict, Verdict::kFailed) << a.detail;
  EXPECT_EQ(a.error, R"({"code":"saldo"})");
  EXPECT_EQ(Run("echo '{\"outcome\":\"failed\"}'\n").cause, "command_failed");
}

TEST_F(ProviderCommand, NotExecutedAndUnknown) {
  Answer a = Run("cat >/dev/null; echo '{\"outcome\":\"not_executed\"}'\n");
  ASSERT_EQ(a.verdict, Verdict::kNotExecuted) << a.detail;
  EXPECT_EQ(json::parse(a.error), json({{"reconciled", "not_executed"}, {"provider", "command"}}));
  a = Run("echo '{\"outcome\":\"unknown\",\"detail\":\"the bank is down\"}'\n");
  EXPECT_EQ(a.verdict, Verdict::kUnknown);
  EXPECT_EQ(a.cause, "command_unknown");
  EXPECT_EQ(a.provider_said, "command: unknown");
  EXPECT_NE(a.detail.find("the bank is down"), std::string::npos) << a.detail;
}

TEST_F(ProviderCommand, ANonZeroExitIsCommandFailedWithItsStderr) {
  Answer a = Run("echo '{\"outcome\":\"completed\"}'\necho 'boom: no route' >&2\nexit 3\n");
  EXPECT_EQ(a.verdict, Verdict::kUnknown);
  EXPECT_EQ(a.cause, "command_failed");
  EXPECT_EQ(a.provider_said, "command: exit 3");
  EXPECT_NE(a.detail.find("stderr: boom: no route"), std::string::npos) << a.detail;
  a = Run("kill -TERM $$\n");
  EXPECT_EQ(a.cause, "command_failed");
  EXPECT_EQ(a.provider_said, "command: signal 15");
}

TEST_F(ProviderCommand, GarbledOutputIsCommandFailed) {
  for (const char* body : {
           "echo hello\n",
           "echo '{\"outcome\":\"completed\"'\n",
           "echo '[1]'\n",
           "echo '{\"outcome\":\"done\"}'\n",
           "echo '{}'\n",
           "echo 'log line'; echo '{\"outcome\":\"completed\"}'\n",
           "echo '{\"outcome\":\"completed\",\"respnse\":1}'\n",
           "echo '{\"outcome\":\"not_executed\",\"response\":1}'\n",
           ":\n",
           "head -c 2000000 /dev/zero | tr '\\0' 'x'\n",
       }) {
    Answer a = Run(body);
    EXPECT_EQ(a.verdict, Verdict::kUnknown) << body;
    EXPECT_EQ(a.cause, "command_failed") << body << ": " << a.detail;
    EXPECT_EQ(a.provider_said, "command: bad output") << body;
  }
  // Blank lines and comments around the one line are fine.
  EXPECT_EQ(Run("echo; echo '  {\"outcome\":\"not_executed\",\"_why\":\"x\"}  '; echo\n").verdict,
            Verdict::kNotExecuted);
}

TEST_F(ProviderCommand, ATimeoutKillsTheWholeProcessGroup) {
  const std::string pid_file = dir_.path() + "/bg.pid";
  const auto start = SteadyClock::now();
  Answer a = Run("sleep 30 &\necho $! > " + pid_file + "\nsleep 30\n", 300);
  const auto took = SteadyClock::now() - start;
  EXPECT_EQ(a.verdict, Verdict::kUnknown);
  EXPECT_EQ(a.cause, "command_timeout") << a.detail;
  EXPECT_EQ(a.provider_said, "command: timeout");
  EXPECT_LT(took, std::chrono::seconds(3));
  const pid_t bg = std::atoi(ReadFile(pid_file).c_str());
  ASSERT_GT(bg, 0);
  // The background sleep was killed too (init reaps it shortly).
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i) {
    std::string stat = ReadFile("/proc/" + std::to_string(bg) + "/stat");
    gone = stat.empty() || stat.find(") Z ") != std::string::npos;
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(gone);
}

TEST_F(ProviderCommand, DescendantsHoldingStdoutDoNotHoldTheAnswer) {
  const auto start = SteadyClock::now();
  Answer a = Run("sleep 30 &\necho '{\"outcome\":\"not_executed\"}'\n", 5000);
  EXPECT_EQ(a.verdict, Verdict::kNotExecuted) << a.detail;
  EXPECT_LT(SteadyClock::now() - start, std::chrono::seconds(2));
}

TEST_F(ProviderCommand, AHookThatIgnoresALargeStdinDoesNotRaiseSigpipe) {
  ActionInfo big = Record();
  big.record_json = json{{"payload", std::string(1 << 20, 'a')}}.dump();
  auto p = Make({"/bin/sh", Script("quick.sh", "echo '{\"outcome\":\"not_executed\"}'\n")});
  Answer a = p->Ask(big);
  EXPECT_EQ(a.verdict, Verdict::kNotExecuted) << a.detail;
}

TEST_F(ProviderCommand, TheHmacSecretAndServiceHandOffsAreNotInTheEnvironment) {
  ::setenv("IDEMPOTENCY_HMAC_KEY", "hmac-secret-value", 1);
  ::setenv("NOTIFY_SOCKET", "/run/systemd/notify", 1);
  ::setenv("INTENTD_TEST_VISIBLE", "yes", 1);
  Answer a =
      Run("printf '{\"outcome\":\"unknown\",\"detail\":\"key=%s notify=%s visible=%s\"}\\n' "
          "\"${IDEMPOTENCY_HMAC_KEY:-unset}\" \"${NOTIFY_SOCKET:-unset}\" "
          "\"${INTENTD_TEST_VISIBLE:-unset}\"\n");
  ::unsetenv("IDEMPOTENCY_HMAC_KEY");
  ::unsetenv("NOTIFY_SOCKET");
  ::unsetenv("INTENTD_TEST_VISIBLE");
  EXPECT_NE(a.detail.find("key=unset notify=unset visible=yes"), std::string::npos) << a.detail;
}

TEST_F(ProviderCommand, SignalsAreAtTheirDefaultsInTheHook) {
  // The agent ignores SIGPIPE and blocks SIGTERM; the hook must not inherit either.
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &block, &old);
  struct sigaction ignore = {}, previous = {};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGPIPE, &ignore, &previous);
  Answer a =
      Run("grep -E '^Sig(Blk|Ign):' /proc/self/status | tr '\\n' ' ' > \"$0.sig\"\n"
          "echo '{\"outcome\":\"not_executed\"}'\n");
  sigaction(SIGPIPE, &previous, nullptr);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  EXPECT_EQ(a.verdict, Verdict::kNotExecuted) << a.detail;
  const std::string sig = ReadFile(dir_.path() + "/hook.sh.sig");
  EXPECT_NE(sig.find("SigBlk:\t0000000000000000"), std::string::npos) << sig;
  // grep's SigIgn (inherited from the hook's shell): none of the standard
  // signals. (glibc's posix_spawn leaves its two internal signals, 32 and 33,
  // ignored; programs that use glibc never see those.)
  const size_t at = sig.find("SigIgn:\t");
  ASSERT_NE(at, std::string::npos) << sig;
  const unsigned long long ignored = std::stoull(sig.substr(at + 8, 16), nullptr, 16);
  EXPECT_EQ(ignored & ((1ULL << 31) - 1), 0u) << sig;
}

TEST_F(ProviderCommand, ARecordThatIsNotJsonIsNotSent) {
  auto p = Make({"/bin/sh", Script("hook.sh", "echo '{\"outcome\":\"completed\"}'\n")});
  ActionInfo a = Record();
  a.record_json = "not json";
  EXPECT_EQ(p->Ask(a).cause, "config");
}

TEST_F(ProviderCommand, AProgramThatCannotRunIsRefusedAtStartup) {
  std::string error;
  TypeSettings t;
  t.action_type = "boleto.cobranca";
  t.command = CommandSettings{{dir_.path() + "/missing"}, 1000};
  EXPECT_EQ(MakeProvider(t, &error), nullptr);
  EXPECT_NE(error.find("/missing"), std::string::npos) << error;
  WriteFile(dir_.path() + "/plain.txt", "x", 0644);
  t.command = CommandSettings{{dir_.path() + "/plain.txt"}, 1000};
  EXPECT_EQ(MakeProvider(t, &error), nullptr);
  EXPECT_NE(error.find("not an executable"), std::string::npos) << error;
  // Executable at startup, gone at Ask: command_failed.
  const std::string gone = dir_.path() + "/gone";
  std::filesystem::create_symlink("/bin/true", gone);
  auto p = Make({gone});
  std::filesystem::remove(gone);
  Answer a = p->Ask(Record());
  EXPECT_EQ(a.cause, "command_failed");
  EXPECT_EQ(a.provider_said, "command: not started");
}

// --- the config member ----------------------------------------------------------

bool Parse(const std::string& text, std::vector<TypeSettings>* out, std::string* error) {
  return ParseReconcileConfig(json::parse(text), out, error);
}

std::string ParseError(const std::string& text) {
  std::vector<TypeSettings> out;
  std::string error;
  EXPECT_FALSE(Parse(text, &out, &error)) << text;
  return error;
}

constexpr char kPixEntry[] =
    R"("base_url": "https://pix.psp.example/api/v2/", "token_url": "https://pix.psp.example/oauth/token",
       "client_id": "abc", "client_secret_file": "pix-secret", "cert_file": "c.pem",
       "key_file": "c.key")";

TEST(ProviderConfig, ParsesBothKindsOfProvider) {
  std::vector<TypeSettings> out;
  std::string error;
  ASSERT_TRUE(Parse(std::string(R"({"_comment": "x",
      "pix.cobranca": {"pix_api": {)") +
                        kPixEntry +
                        R"(, "ca_file": "ca.pem", "scope": "cob.read",
                           "timeout_ms": 2500, "_note": 1}},
      "boleto.cobranca": {"command": ["/usr/local/bin/boleto", "--prod"], "timeout_ms": 20000},
      "ted": {"command": ["/bin/true"]}})",
                    &out, &error))
      << error;
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].action_type, "boleto.cobranca");
  ASSERT_TRUE(out[0].command);
  EXPECT_FALSE(out[0].pix_api);
  EXPECT_EQ(out[0].command->argv, (std::vector<std::string>{"/usr/local/bin/boleto", "--prod"}));
  EXPECT_EQ(out[0].command->timeout_ms, 20000);
  EXPECT_EQ(out[1].action_type, "pix.cobranca");
  ASSERT_TRUE(out[1].pix_api);
  const PixApiSettings& pix = *out[1].pix_api;
  EXPECT_EQ(pix.base_url, "https://pix.psp.example/api/v2");
  EXPECT_EQ(pix.token_url, "https://pix.psp.example/oauth/token");
  EXPECT_EQ(pix.client_id, "abc");
  EXPECT_EQ(pix.client_secret_file, "pix-secret");
  EXPECT_EQ(pix.cert_file, "c.pem");
  EXPECT_EQ(pix.key_file, "c.key");
  EXPECT_EQ(pix.ca_file, "ca.pem");
  EXPECT_EQ(pix.scope, "cob.read");
  EXPECT_EQ(pix.timeout_ms, 2500);
  EXPECT_EQ(out[2].command->timeout_ms, 10000);

  out.clear();
  ASSERT_TRUE(Parse(R"({"pix.cobranca": {"pix_api": {"base_url": "http://127.0.0.1:8080",
      "token_url": "http://127.0.0.1:8080/oauth/token", "client_id": "abc",
      "client_secret_file": "s"}}})",
                    &out, &error))
      << error;
  EXPECT_EQ(out[0].pix_api->timeout_ms, 10000);
  EXPECT_EQ(out[0].pix_api->scope, "");
  EXPECT_TRUE(Parse("{}", &out, &error));
}

TEST(ProviderConfig, ErrorsNameTheMemberAtFault) {
  const std::string pix = std::string(R"({"pix.cobranca": {"pix_api": {)") + kPixEntry;
  EXPECT_EQ(ParseError(R"({"pix.cobranca": {"pix_api": {"token_url": "https://x/t",
      "client_id": "a", "client_secret_file": "s", "cert_file": "c", "key_file": "k"}}})"),
            "reconcile.pix.cobranca.pix_api: missing base_url");
  EXPECT_EQ(ParseError("[]"), "\"reconcile\" must be an object keyed by action type");
  EXPECT_EQ(ParseError(pix + R"(, "base": "x"}}})"),
            "reconcile.pix.cobranca.pix_api: unknown member \"base\" (expected base_url, "
            "token_url, client_id, client_secret_file, cert_file, key_file, ca_file, scope, "
            "timeout_ms)");
  EXPECT_EQ(ParseError(pix + R"(, "timeout_ms": 0}}})"),
            "reconcile.pix.cobranca.pix_api.timeout_ms must be an integer from 1 to 600000");
  EXPECT_EQ(ParseError(pix + R"(, "timeout_ms": 600001}}})"),
            "reconcile.pix.cobranca.pix_api.timeout_ms must be an integer from 1 to 600000");
  EXPECT_EQ(ParseError(pix + R"(, "client_id": 5}}})"),
            "reconcile.pix.cobranca.pix_api.client_id must be a non-empty string");
  EXPECT_EQ(ParseError(pix + R"(}, "command": ["/bin/true"]}})"),
            "reconcile.pix.cobranca: has both pix_api and command; keep one");
  EXPECT_EQ(ParseError(pix + R"(}, "timeout_ms": 5}})"),
            "reconcile.pix.cobranca.timeout_ms goes with command; for pix_api, put timeout_ms "
            "inside pix_api");
  EXPECT_EQ(ParseError(R"({"t": {}})"), "reconcile.t: names no provider (pix_api or command)");
  EXPECT_EQ(ParseError(R"({"t": {"command": "/bin/true"}})"),
            "reconcile.t.command must be a non-empty array of strings (the program, then its "
            "arguments)");
  EXPECT_EQ(ParseError(R"({"t": {"command": []}})"),
            "reconcile.t.command must be a non-empty array of strings (the program, then its "
            "arguments)");
  EXPECT_EQ(ParseError(R"({"t": {"command": ["hook.sh"]}})"),
            "reconcile.t.command[0] must be an absolute path (no search of $PATH)");
  EXPECT_EQ(ParseError(R"({"t": {"command": ["/bin/true", 1]}})"),
            "reconcile.t.command must hold only strings, without NUL characters");
  EXPECT_EQ(ParseError(R"({"t": {"command": ["/bin/true"], "timeout_ms": 0}})"),
            "reconcile.t.timeout_ms must be an integer from 1 to 600000");
  EXPECT_EQ(
      ParseError(R"({"t": {"command": ["/bin/true"], "retries": 0}})"),
      "reconcile.t: unknown member \"retries\" (expected pix_api, or command and timeout_ms)");
  EXPECT_EQ(ParseError(R"({"t": 1})"), "reconcile.t must be an object with pix_api or command");

  const std::string rest = R"("client_id": "a", "client_secret_file": "s")";
  auto urls = [&](const std::string& base, const std::string& token, const std::string& more) {
    return ParseError(R"({"p": {"pix_api": {"base_url": ")" + base + R"(", "token_url": ")" +
                      token + "\", " + rest + more + "}}}");
  };
  EXPECT_EQ(urls("ftp://x", "http://x/t", ""),
            "reconcile.p.pix_api.base_url must start with https:// or http://");
  EXPECT_EQ(urls("http://u:p@x", "http://x/t", ""),
            "reconcile.p.pix_api.base_url must not carry credentials (user:password@); the "
            "client secret goes in client_secret_file");
  EXPECT_EQ(urls("http://x/a b", "http://x/t", ""),
            "reconcile.p.pix_api.base_url must not hold spaces or control characters");
  EXPECT_EQ(
      urls("http://x?a=1", "http://x/t", ""),
      "reconcile.p.pix_api.base_url must not hold a query (?): /cob/{txid} is appended to it");
  EXPECT_EQ(urls("https://x", "http://x/t", R"(, "cert_file": "c", "key_file": "k")"),
            "reconcile.p.pix_api: base_url and token_url must both be https:// or both http:// "
            "(the token request carries the client secret)");
  EXPECT_EQ(urls("https://x", "https://x/t", R"(, "cert_file": "c")"),
            "reconcile.p.pix_api: missing key_file (the API Pix requires a client certificate: "
            "cert_file and key_file)");
  EXPECT_EQ(urls("http://x", "http://x/t", R"(, "ca_file": "c")"),
            "reconcile.p.pix_api: cert_file, key_file and ca_file have no use with http:// URLs "
            "(use https:// for mutual TLS)");
  EXPECT_EQ(ParseError(R"({"p": {"pix_api": {"base_url": "http://x", "token_url": "http://x/t",
      "client_id": "a:b", "client_secret_file": "s"}}})"),
            "reconcile.p.pix_api.client_id must not hold \":\" (HTTP Basic authentication cannot "
            "carry it)");
}

TEST(ProviderRetryAfter, SecondsOrAnHttpDate) {
  const int64_t now = 1767225600;  // 2026-01-01T00:00:00Z
  EXPECT_EQ(ParseRetryAfterMs("", now), 0);
  EXPECT_EQ(ParseRetryAfterMs("0", now), 0);
  EXPECT_EQ(ParseRetryAfterMs(" 7 ", now), 7000);
  EXPECT_EQ(ParseRetryAfterMs("999999999999", now), 24LL * 3600 * 1000);
  EXPECT_EQ(ParseRetryAfterMs("Thu, 01 Jan 2026 00:02:00 GMT", now), 120000);
  EXPECT_EQ(ParseRetryAfterMs("Wed, 31 Dec 2025 23:00:00 GMT", now), 0);  // past
  EXPECT_EQ(ParseRetryAfterMs("soon", now), 0);
  EXPECT_EQ(ParseRetryAfterMs("-5", now), 0);
}

TEST(ProviderCauses, TheSetIsFixed) { EXPECT_EQ(std::size(kCauses), 14u); }

}  // namespace
}  // namespace intentd::reconcile
