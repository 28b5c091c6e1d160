#!/usr/bin/python3
"""Self-test of the API Pix test server (tests/reconcile/pix_server.py).

Makes a throw-away PKI with make_test_pki.sh, starts the server (mutual TLS,
control API on a Unix socket) and checks it from the outside with
urllib.request and an SSL context holding the test client certificate (and
once with the curl command, when it is installed): OAuth, charge creation and
reads, every fault kind, status changes, wrong certificates on either side,
--plain-http with the TCP control port, --base-path and a clean exit on
SIGTERM.

Usage: /usr/bin/python3 tests/reconcile/pix_server_test.py [-v]
Prints `N passed, M failed, K skipped` last; exits 0 when nothing failed.
Python 3 standard library only.
"""

import base64
import calendar
import http.client
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
SERVER = os.path.join(HERE, "pix_server.py")
PKI_SCRIPT = os.path.join(HERE, "make_test_pki.sh")
CLIENT_ID = "intentd-test"
CLIENT_SECRET = "s3cr3t:with/odd=chars"
ERR = "https://pix.bcb.gov.br/api/v2/error/"
START_TIMEOUT_S = 10.0

TMP = None      # the temporary directory
MAIN = None     # the main (mutual TLS) server
MAIN_LOG = ""   # its log, kept once the directory is gone


def txid(n):
    """A valid txid (26..35 alphanumerics), distinct per n."""
    return f"intentdtest{n:015d}x"


def cob_body(valor="10.00", **extra):
    body = {"calendario": {"expiracao": 3600},
            "devedor": {"cpf": "12345678909", "nome": "Fulano de Tal"},
            "valor": {"original": valor},
            "chave": "7d9f0335-8dcc-4054-9bf9-0dbd61d36906",
            "solicitacaoPagador": "Pedido 42"}
    body.update(extra)
    return body


def pki(name):
    return os.path.join(TMP, name)


def client_context(ca="ca.pem", cert="client.pem", key="client.key"):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(cafile=pki(ca))
    if cert:
        ctx.load_cert_chain(pki(cert), pki(key))
    return ctx


def unwrap(exc):
    """The underlying error of a urllib.error.URLError."""
    while isinstance(exc, urllib.error.URLError) and not isinstance(exc, urllib.error.HTTPError) \
            and isinstance(exc.reason, BaseException):
        exc = exc.reason
    return exc


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=10):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.unix_path)


class Server:
    """One pix_server.py process."""

    def __init__(self, name, *, plain=False, cert="server.pem", key="server.key",
                 client_ca="ca.pem", control_tcp=False, extra=()):
        self.name = name
        self.plain = plain
        d = os.path.join(TMP, name)
        os.mkdir(d)
        self.port_file = os.path.join(d, "port")
        self.control_port_file = os.path.join(d, "control-port")
        self.control_socket = None if control_tcp else os.path.join(d, "control.sock")
        self.log_path = os.path.join(d, "server.log")
        secret_file = os.path.join(d, "secret")
        with open(secret_file, "w") as f:
            f.write(CLIENT_SECRET + "\n")
        args = [sys.executable, SERVER, "--port", "0", "--port-file", self.port_file,
                "--client-id", CLIENT_ID, "--client-secret-file", secret_file]
        if plain:
            args.append("--plain-http")
        else:
            args += ["--cert", pki(cert), "--key", pki(key), "--client-ca", pki(client_ca)]
        if control_tcp:
            args += ["--control-port", "0", "--control-port-file", self.control_port_file]
        else:
            args += ["--control-socket", self.control_socket]
        args += list(extra)
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_TIMEOUT_S
        while not os.path.exists(self.port_file):
            if self.proc.poll() is not None:
                raise RuntimeError(f"{name} server exited {self.proc.returncode}:\n{self.log_text()}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{name} server did not start:\n{self.log_text()}")
            time.sleep(0.02)
        with open(self.port_file) as f:
            self.port = int(f.read())
        self.control_port = None
        if control_tcp:
            with open(self.control_port_file) as f:
                self.control_port = int(f.read())
        scheme = "http" if plain else "https"
        self.base = f"{scheme}://localhost:{self.port}"

    def log_text(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def stop(self, timeout=5.0):
        """SIGTERM, and the exit status (None when it had to be killed)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                self.log.close()
                return None
        self.log.close()
        return self.proc.returncode

    # -- the control API --------------------------------------------------------

    def control(self, method, path, obj=None):
        if self.control_socket:
            conn = UnixHTTPConnection(self.control_socket)
        else:
            conn = http.client.HTTPConnection("127.0.0.1", self.control_port, timeout=10)
        try:
            body = None if obj is None else json.dumps(obj).encode()
            headers = {"Content-Type": "application/json"} if body is not None else {}
            conn.request(method, path, body=body, headers=headers)
            resp = conn.getresponse()
            return resp.status, json.loads(resp.read())
        finally:
            conn.close()

    def state(self):
        status, st = self.control("GET", "/state")
        assert status == 200, st
        return st

    def faults(self, *rules):
        status, ans = self.control("POST", "/faults", list(rules))
        assert status == 200, ans
        return ans["faults"]

    # -- the API ----------------------------------------------------------------

    def call(self, method, path, body=None, headers=None, ctx="default", timeout=5.0, base=None):
        """(status, headers, body bytes) of one request; HTTP errors are answers,
        anything else (timeouts, resets, TLS failures) is raised unwrapped."""
        if ctx == "default":
            ctx = None if self.plain else client_context()
        handlers = [urllib.request.ProxyHandler({})]
        if ctx is not None:
            handlers.append(urllib.request.HTTPSHandler(context=ctx))
        opener = urllib.request.build_opener(*handlers)
        data = body if body is None or isinstance(body, bytes) else json.dumps(body).encode()
        h = dict(headers or {})
        if data is not None and "Content-Type" not in h:
            h["Content-Type"] = "application/json"
        req = urllib.request.Request((base or self.base) + path, data=data, method=method, headers=h)
        try:
            with opener.open(req, timeout=timeout) as r:
                return r.status, r.headers, r.read()
        except urllib.error.HTTPError as e:
            with e:
                return e.code, e.headers, e.read()
        except urllib.error.URLError as e:
            raise unwrap(e) from None

    def token_call(self, client_id=CLIENT_ID, secret=CLIENT_SECRET, form_only=False, grant="client_credentials",
                   **kw):
        fields = {"grant_type": grant} if grant else {}
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        if form_only:
            fields.update(client_id=client_id, client_secret=secret)
        else:
            basic = base64.b64encode(f"{client_id}:{secret}".encode()).decode()
            headers["Authorization"] = "Basic " + basic
        return self.call("POST", "/oauth/token", urllib.parse.urlencode(fields).encode(), headers, **kw)

    def token(self, **kw):
        status, _, body = self.token_call(**kw)
        assert status == 200, body
        return json.loads(body)["access_token"]

    def bearer(self, tok):
        return {"Authorization": "Bearer " + tok}

    def put_cob(self, tok, t, body=None, **kw):
        return self.call("PUT", f"/cob/{t}", cob_body() if body is None else body, self.bearer(tok), **kw)

    def get_cob(self, tok, t, **kw):
        return self.call("GET", f"/cob/{t}", None, self.bearer(tok), **kw)


def crc16(data):
    """CRC-16/CCITT-FALSE, written independently of the server's."""
    crc = 0xFFFF
    for b in data:
        x = ((crc >> 8) ^ b) & 0xFF
        x ^= x >> 4
        crc = ((crc << 8) ^ (x << 12) ^ (x << 5) ^ x) & 0xFFFF
    return crc


def setUpModule():
    global TMP, MAIN
    TMP = tempfile.mkdtemp(prefix="pix-server-test-")
    subprocess.run(["bash", PKI_SCRIPT, TMP], check=True)
    MAIN = Server("main")


def tearDownModule():
    global MAIN_LOG
    if MAIN is not None:
        MAIN.stop()
        MAIN_LOG = MAIN.log_text()
    if TMP is not None:
        shutil.rmtree(TMP, ignore_errors=True)


class PixTest(unittest.TestCase):
    def setUp(self):
        status, _ = MAIN.control("POST", "/reset")
        self.assertEqual(status, 200)
        self.s = MAIN

    def problem(self, status, headers, body, want_status, want_type):
        self.assertEqual(status, want_status, body)
        self.assertEqual(headers.get_content_type(), "application/problem+json")
        p = json.loads(body)
        self.assertEqual(p["type"], ERR + want_type)
        self.assertEqual(p["status"], want_status)
        self.assertTrue(p["title"])
        return p


class TokenTest(PixTest):
    def test_basic_auth_issues_token(self):
        status, headers, body = self.s.token_call()
        self.assertEqual(status, 200, body)
        t = json.loads(body)
        self.assertEqual(t["token_type"], "Bearer")
        self.assertEqual(t["expires_in"], 3600)
        self.assertEqual(t["scope"], "cob.write cob.read")
        self.assertGreaterEqual(len(t["access_token"]), 20)
        self.assertEqual(headers["Cache-Control"], "no-store")
        self.assertEqual(self.s.state()["tokens_issued"], 1)

    def test_form_fields_issue_token(self):
        status, _, body = self.s.token_call(form_only=True)
        self.assertEqual(status, 200, body)
        tok = json.loads(body)["access_token"]
        # the token works
        self.assertEqual(self.s.put_cob(tok, txid(1))[0], 201)

    def test_wrong_credentials_refused(self):
        for kw in ({"secret": "wrong"}, {"client_id": "someone-else"},
                   {"secret": "wrong", "form_only": True}):
            status, headers, body = self.s.token_call(**kw)
            self.assertEqual(status, 401, kw)
            self.assertEqual(json.loads(body), {"error": "invalid_client"})
            self.assertIn("WWW-Authenticate", headers)
        status, _, body = self.s.call("POST", "/oauth/token", b"grant_type=client_credentials",
                                      {"Content-Type": "application/x-www-form-urlencoded"})
        self.assertEqual((status, json.loads(body)), (401, {"error": "invalid_client"}))
        self.assertEqual(self.s.state()["tokens_issued"], 0)

    def test_wrong_grant_type_refused(self):
        status, _, body = self.s.token_call(grant="password")
        self.assertEqual((status, json.loads(body)["error"]), (400, "unsupported_grant_type"))
        status, _, body = self.s.token_call(grant=None)
        self.assertEqual((status, json.loads(body)["error"]), (400, "invalid_request"))
        self.assertEqual(self.s.state()["tokens_issued"], 0)

    def test_cob_needs_a_valid_bearer_token(self):
        for headers in ({}, {"Authorization": "Bearer not-a-token"},
                        {"Authorization": "Basic " + base64.b64encode(b"a:b").decode()}):
            status, h, body = self.s.call("PUT", f"/cob/{txid(2)}", cob_body(), headers)
            self.problem(status, h, body, 401, "AcessoNegado")
            status, h, body = self.s.call("GET", f"/cob/{txid(2)}", None, headers)
            self.assertEqual(status, 401)
        self.assertEqual(self.s.state()["charges_created"], 0)

    def test_revoked_token_refused(self):
        tok = self.s.token()
        self.assertEqual(self.s.get_cob(tok, txid(3))[0], 404)
        self.assertEqual(self.s.control("POST", "/tokens/revoke")[1], {"revoked": 1})
        self.assertEqual(self.s.get_cob(tok, txid(3))[0], 401)

    def test_scope_is_enforced(self):
        status, _, body = self.s.call(
            "POST", "/oauth/token",
            urllib.parse.urlencode({"grant_type": "client_credentials", "scope": "cob.read",
                                    "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET}).encode(),
            {"Content-Type": "application/x-www-form-urlencoded"})
        self.assertEqual(status, 200, body)
        self.assertEqual(json.loads(body)["scope"], "cob.read")
        tok = json.loads(body)["access_token"]
        status, h, body = self.s.put_cob(tok, txid(4))
        self.problem(status, h, body, 403, "AcessoNegado")
        self.assertEqual(self.s.get_cob(tok, txid(4))[0], 404)
        self.assertEqual(self.s.state()["charges_created"], 0)


class ChargeTest(PixTest):
    def setUp(self):
        super().setUp()
        self.tok = self.s.token()

    def test_put_creates_exactly_one_charge(self):
        t = txid(10)
        before = time.time()
        status, headers, body = self.s.put_cob(self.tok, t)
        self.assertEqual(status, 201, body)
        self.assertEqual(headers.get_content_type(), "application/json")
        c = json.loads(body)
        self.assertEqual(c["txid"], t)
        self.assertEqual(c["revisao"], 0)
        self.assertEqual(c["status"], "ATIVA")
        self.assertEqual(c["calendario"]["expiracao"], 3600)
        criacao = calendar.timegm(time.strptime(c["calendario"]["criacao"][:19], "%Y-%m-%dT%H:%M:%S"))
        self.assertTrue(c["calendario"]["criacao"].endswith("Z"))
        self.assertLess(abs(criacao - before), 5)
        self.assertEqual(c["loc"]["tipoCob"], "cob")
        self.assertIsInstance(c["loc"]["id"], int)
        self.assertEqual(c["location"], c["loc"]["location"])
        self.assertEqual(c["valor"], {"original": "10.00"})
        self.assertEqual(c["devedor"], {"cpf": "12345678909", "nome": "Fulano de Tal"})
        self.assertEqual(c["chave"], "7d9f0335-8dcc-4054-9bf9-0dbd61d36906")
        self.assertEqual(c["solicitacaoPagador"], "Pedido 42")
        self.assertNotIn("pix", c)
        brcode = c["pixCopiaECola"]
        self.assertTrue(brcode.startswith("000201"), brcode)
        self.assertIn(c["location"], brcode)
        self.assertIn("540510.00", brcode)
        self.assertEqual(brcode[-8:-4], "6304")
        self.assertEqual(int(brcode[-4:], 16), crc16(brcode[:-4].encode()))

        st = self.s.state()
        self.assertEqual(st["charges_created"], 1)
        self.assertEqual(list(st["charges"]), [t])

        # The same txid again, even with another amount: refused, nothing created.
        status, h, body = self.s.put_cob(self.tok, t, cob_body(valor="99.00"))
        p = self.problem(status, h, body, 400, "CobOperacaoInvalida")
        self.assertEqual(p["violacoes"][0]["propriedade"], "txid")
        st = self.s.state()
        self.assertEqual(st["charges_created"], 1)
        self.assertEqual(st["charges"][t]["valor"]["original"], "10.00")
        self.assertEqual(st["requests"]["PUT /cob/{txid}"], 2)

    def test_concurrent_puts_of_one_txid_create_one_charge(self):
        t = txid(11)
        results = []
        barrier = threading.Barrier(6)

        def put():
            barrier.wait()
            results.append(self.s.put_cob(self.tok, t)[0])

        threads = [threading.Thread(target=put) for _ in range(6)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        self.assertEqual(sorted(results), [201] + [400] * 5)
        self.assertEqual(self.s.state()["charges_created"], 1)

    def test_put_validation(self):
        cases = [
            ("abc", cob_body(), "txid"),                            # too short
            ("intentd-test-00000000000000001", cob_body(), "txid"),  # a dash
            ("x" * 36, cob_body(), "txid"),                          # too long
            (txid(12), {"chave": "a@b.com"}, "cob.valor.original"),
            (txid(12), cob_body(valor="10"), "cob.valor.original"),
            (txid(12), cob_body(valor=10.0), "cob.valor.original"),
            (txid(12), cob_body(valor="0.00"), "cob.valor.original"),
            (txid(12), {"valor": {"original": "1.00"}}, "cob.chave"),
            (txid(12), cob_body(calendario={"expiracao": 0}), "cob.calendario.expiracao"),
            (txid(12), cob_body(devedor={"cpf": "12345678909", "cnpj": "12345678000195", "nome": "X"}),
             "cob.devedor"),
            (txid(12), cob_body(solicitacaoPagador="x" * 141), "cob.solicitacaoPagador"),
        ]
        for t, body, prop in cases:
            with self.subTest(txid=t, prop=prop):
                status, h, raw = self.s.put_cob(self.tok, t, body)
                p = self.problem(status, h, raw, 400, "CobOperacaoInvalida")
                self.assertIn(prop, [v["propriedade"] for v in p["violacoes"]])
        status, h, raw = self.s.call("PUT", f"/cob/{txid(12)}", b"{not json", self.s.bearer(self.tok))
        self.problem(status, h, raw, 400, "CobOperacaoInvalida")
        self.assertEqual(self.s.state()["charges_created"], 0)
        # the minimal valid body is accepted, with the default expiry
        status, _, raw = self.s.put_cob(self.tok, txid(12), {"valor": {"original": "0.01"}, "chave": "k"})
        self.assertEqual(status, 201, raw)
        self.assertEqual(json.loads(raw)["calendario"]["expiracao"], 86400)

    def test_get(self):
        t = txid(13)
        created = json.loads(self.s.put_cob(self.tok, t)[2])
        status, h, body = self.s.get_cob(self.tok, t)
        self.assertEqual(status, 200, body)
        self.assertEqual(json.loads(body), created)
        status, h, body = self.s.get_cob(self.tok, txid(14))
        self.problem(status, h, body, 404, "CobNaoEncontrado")
        status, h, body = self.s.get_cob(self.tok, "short")
        self.problem(status, h, body, 400, "CobConsultaInvalida")
        self.assertEqual(self.s.get_cob(self.tok, t + "?revisao=0")[0], 200)
        self.assertEqual(self.s.get_cob(self.tok, t + "?revisao=1")[0], 400)
        # also reachable as 127.0.0.1 (the certificate's IP SAN)
        status, _, _ = self.s.get_cob(self.tok, t, base=f"https://127.0.0.1:{self.s.port}")
        self.assertEqual(status, 200)
        self.assertEqual(self.s.state()["requests"]["GET /cob/{txid}"], 6)

    def test_unknown_path_and_method(self):
        status, h, body = self.s.call("GET", "/cobv/" + txid(15), None, self.s.bearer(self.tok))
        self.problem(status, h, body, 404, "NaoEncontrado")
        status, h, body = self.s.call("PATCH", f"/cob/{txid(15)}", {"status": "REMOVIDA_PELO_USUARIO_RECEBEDOR"},
                                      self.s.bearer(self.tok))
        self.assertEqual(status, 405)
        self.assertEqual(h["Allow"], "GET, PUT")

    def test_status_change_to_concluida(self):
        t = txid(16)
        self.s.put_cob(self.tok, t)
        status, ans = self.s.control("POST", f"/charges/{t}/status", {"status": "CONCLUIDA"})
        self.assertEqual(status, 200, ans)
        c = json.loads(self.s.get_cob(self.tok, t)[2])
        self.assertEqual(c["status"], "CONCLUIDA")
        self.assertEqual(len(c["pix"]), 1)
        pix = c["pix"][0]
        self.assertRegex(pix["endToEndId"], r"^E\d{8}\d{12}[A-Za-z0-9]{11}$")
        self.assertEqual(pix["txid"], t)
        self.assertEqual(pix["valor"], "10.00")
        self.assertRegex(pix["horario"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
        self.assertEqual(c["revisao"], 0)

        status, _ = self.s.control("POST", f"/charges/{t}/status", {"status": "REMOVIDA_PELO_PSP"})
        self.assertEqual(status, 200)
        c = json.loads(self.s.get_cob(self.tok, t)[2])
        self.assertEqual(c["status"], "REMOVIDA_PELO_PSP")
        self.assertNotIn("pix", c)
        self.assertEqual(self.s.control("POST", f"/charges/{t}/status", {"status": "PAGA"})[0], 400)
        self.assertEqual(self.s.control("POST", f"/charges/{txid(17)}/status", {"status": "CONCLUIDA"})[0], 404)
        self.assertEqual(self.s.state()["charges"][t]["status"], "REMOVIDA_PELO_PSP")

    def test_state_and_reset(self):
        self.s.put_cob(self.tok, txid(18))
        self.s.get_cob(self.tok, txid(18))
        self.s.get_cob(self.tok, txid(19))
        st = self.s.state()
        self.assertEqual(st["requests"], {"POST /oauth/token": 1, "PUT /cob/{txid}": 1, "GET /cob/{txid}": 2})
        self.assertEqual(st["tokens_issued"], 1)
        self.assertEqual(st["charges_created"], 1)
        # one log line per request
        deadline = time.monotonic() + 2
        while f'"PUT /cob/{txid(18)}" 201' not in self.s.log_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertIn(f'"PUT /cob/{txid(18)}" 201', self.s.log_text())
        self.assertIn(f'"GET /cob/{txid(19)}" 404', self.s.log_text())
        self.s.faults({"fault": "close"})
        self.assertEqual(self.s.control("POST", "/reset")[0], 200)
        st = self.s.state()
        self.assertEqual((st["charges"], st["charges_created"], st["requests"], st["tokens_issued"], st["faults"]),
                         ({}, 0, {}, 0, []))
        self.assertEqual(self.s.get_cob(self.tok, txid(18))[0], 401)  # tokens are gone too


class FaultTest(PixTest):
    def setUp(self):
        super().setUp()
        self.tok = self.s.token()
        self.t = txid(30)
        self.assertEqual(self.s.put_cob(self.tok, self.t)[0], 201)

    def test_status_fault_with_retry_after_and_times(self):
        self.s.faults({"path": "/cob/", "method": "GET", "fault": "status", "status": 503,
                       "retry_after": 7, "times": 2})
        for _ in range(2):
            status, h, body = self.s.get_cob(self.tok, self.t)
            self.problem(status, h, body, 503, "ServicoIndisponivel")
            self.assertEqual(h["Retry-After"], "7")
        status, h, _ = self.s.get_cob(self.tok, self.t)
        self.assertEqual(status, 200)
        self.assertIsNone(h["Retry-After"])
        rule = self.s.state()["faults"][0]
        self.assertEqual((rule["applied"], rule["remaining"]), (2, 0))

    def test_status_fault_before_processing_creates_nothing(self):
        self.s.faults({"path": "/cob/", "method": "PUT", "fault": "status", "status": 500, "times": 1})
        t = txid(31)
        status, h, body = self.s.put_cob(self.tok, t)
        self.problem(status, h, body, 500, "ErroInternoDoServidor")
        self.assertNotIn(t, self.s.state()["charges"])
        self.assertEqual(self.s.put_cob(self.tok, t)[0], 201)
        self.assertEqual(self.s.state()["charges_created"], 2)

    def test_status_fault_after_processing_keeps_the_charge(self):
        # The provider created the charge, the answer was an error: the case
        # `intentd reconcile` exists for.
        self.s.faults({"path": "/cob/{txid}", "method": "PUT", "fault": "status", "status": 504,
                       "after": True, "times": 1})
        t = txid(32)
        status, h, body = self.s.put_cob(self.tok, t)
        self.problem(status, h, body, 504, "IndisponibilidadePorTempoEsgotado")
        self.assertIn(t, self.s.state()["charges"])
        self.assertEqual(self.s.get_cob(self.tok, t)[0], 200)

    def test_method_and_path_matching(self):
        self.s.faults({"path": "/cob/", "method": "GET", "fault": "status", "status": 500})
        for _ in range(3):
            self.assertEqual(self.s.get_cob(self.tok, self.t)[0], 500)
        self.assertEqual(self.s.put_cob(self.tok, txid(33))[0], 201)   # other method
        self.assertEqual(self.s.token_call()[0], 200)                    # other path
        self.assertEqual(self.s.state()["faults"][0]["applied"], 3)
        self.assertEqual(self.s.control("DELETE", "/faults")[1], {"cleared": 1})
        self.assertEqual(self.s.get_cob(self.tok, self.t)[0], 200)

    def test_timeout_holds_until_the_client_gives_up(self):
        self.s.faults({"path": "/cob/", "method": "GET", "fault": "timeout", "seconds": 20, "times": 1})
        t0 = time.monotonic()
        with self.assertRaises(TimeoutError):
            self.s.get_cob(self.tok, self.t, timeout=0.5)
        elapsed = time.monotonic() - t0
        self.assertGreaterEqual(elapsed, 0.45)
        self.assertLess(elapsed, 5)
        self.assertEqual(self.s.get_cob(self.tok, self.t)[0], 200)   # times: 1
        # the server noticed the client leaving, long before its 20 s
        deadline = time.monotonic() + 3
        while "held-then-closed" not in self.s.log_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertIn("held-then-closed", self.s.log_text())

    def test_timeout_after_processing_creates_the_charge(self):
        self.s.faults({"path": "/cob/", "method": "PUT", "fault": "timeout", "seconds": 20,
                       "after": True, "times": 1})
        t = txid(34)
        with self.assertRaises(TimeoutError):
            self.s.put_cob(self.tok, t, timeout=0.5)
        self.assertEqual(self.s.state()["charges_created"], 2)
        self.assertEqual(json.loads(self.s.get_cob(self.tok, t)[2])["txid"], t)

    def test_slow(self):
        self.s.faults({"path": "/cob/", "method": "GET", "fault": "slow", "delay_ms": 600, "times": 2})
        t0 = time.monotonic()
        status, _, body = self.s.get_cob(self.tok, self.t)
        self.assertGreaterEqual(time.monotonic() - t0, 0.55)
        self.assertEqual(status, 200)
        self.assertEqual(json.loads(body)["txid"], self.t)
        with self.assertRaises(TimeoutError):   # slower than this client waits
            self.s.get_cob(self.tok, self.t, timeout=0.2)

    def test_bad_json(self):
        good = self.s.get_cob(self.tok, self.t)[2]
        self.s.faults({"path": "/cob/", "method": "GET", "fault": "bad_json", "times": 1})
        status, h, body = self.s.get_cob(self.tok, self.t)
        self.assertEqual(status, 200)
        self.assertEqual(h.get_content_type(), "application/json")
        self.assertGreater(len(body), 0)
        self.assertLess(len(body), len(good))
        self.assertTrue(good.startswith(body))
        with self.assertRaises(ValueError):
            json.loads(body)
        self.assertEqual(self.s.get_cob(self.tok, self.t)[2], good)

    def test_close(self):
        self.s.faults({"path": "/cob/", "method": "GET", "fault": "close", "times": 1})
        t0 = time.monotonic()
        with self.assertRaises((ConnectionError, ssl.SSLEOFError)):
            self.s.get_cob(self.tok, self.t, timeout=5)
        self.assertLess(time.monotonic() - t0, 3)
        st = self.s.state()
        self.assertEqual(st["faults_applied"], 1)
        self.assertEqual(st["requests"]["GET /cob/{txid}"], 1)  # it did reach the server
        self.assertEqual(self.s.get_cob(self.tok, self.t)[0], 200)

    def test_close_after_processing_creates_the_charge(self):
        self.s.faults({"path": "/cob/", "method": "PUT", "fault": "close", "after": True, "times": 1})
        t = txid(35)
        with self.assertRaises((ConnectionError, ssl.SSLEOFError)):
            self.s.put_cob(self.tok, t)
        self.assertIn(t, self.s.state()["charges"])

    def test_token_401(self):
        self.s.faults({"fault": "token_401", "times": 1})
        status, _, body = self.s.token_call()
        self.assertEqual((status, json.loads(body)), (401, {"error": "invalid_client"}))
        self.assertEqual(self.s.get_cob(self.tok, self.t)[0], 200)   # issued tokens still work
        self.assertEqual(self.s.token_call()[0], 200)                # times: 1
        self.assertEqual(self.s.state()["tokens_issued"], 2)

    def test_bad_rules_refused(self):
        for rule in ({"fault": "explode"}, {"fault": "status"}, {"fault": "status", "status": 99},
                     {"fault": "slow"}, {"fault": "close", "times": 0}, {"fault": "close", "pth": "/cob/"},
                     {"fault": "bad_json", "after": True}, {"fault": "close", "delay_ms": 3}):
            with self.subTest(rule=rule):
                status, ans = self.s.control("POST", "/faults", [rule])
                self.assertEqual(status, 400, ans)
                self.assertIn("error", ans)
        self.assertEqual(self.s.state()["faults"], [])
        self.assertEqual(self.s.get_cob(self.tok, self.t)[0], 200)


class CertificateTest(PixTest):
    """Wrong certificates, on either side, must stop the request before HTTP."""

    def assert_refused_before_http(self, ctx, errors=(ssl.SSLError, ConnectionError)):
        with self.assertRaises(errors) as cm:
            self.s.call("POST", "/oauth/token", b"grant_type=client_credentials",
                        {"Content-Type": "application/x-www-form-urlencoded"}, ctx=ctx)
        self.assertEqual(self.s.state()["requests"], {})
        return cm.exception

    def test_rogue_client_certificate_refused_by_server(self):
        self.assert_refused_before_http(client_context(cert="rogue-client.pem", key="rogue-client.key"))
        deadline = time.monotonic() + 2
        while "TLS handshake refused" not in self.s.log_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertIn("TLS handshake refused", self.s.log_text())

    def test_no_client_certificate_refused_by_server(self):
        self.assert_refused_before_http(client_context(cert=None))

    def test_client_trusting_only_the_rogue_ca_refuses_the_server(self):
        e = self.assert_refused_before_http(client_context(ca="rogue-ca.pem"), ssl.SSLCertVerificationError)
        self.assertIn("certificate verify failed", str(e))

    def test_server_with_the_rogue_certificate_is_refused(self):
        rogue = Server("rogue", cert="rogue-server.pem", key="rogue-server.key", client_ca="rogue-ca.pem")
        try:
            with self.assertRaises(ssl.SSLCertVerificationError):
                rogue.token_call(ctx=client_context())
            self.assertEqual(rogue.state()["requests"], {})
            # control: the same instance answers a client of the rogue PKI, so
            # the refusal above was the certificate's doing
            status, _, _ = rogue.token_call(ctx=client_context("rogue-ca.pem", "rogue-client.pem", "rogue-client.key"))
            self.assertEqual(status, 200)
        finally:
            self.assertEqual(rogue.stop(), 0)

    def test_curl(self):
        curl = shutil.which("curl")
        if not curl:
            self.skipTest("curl is not installed")
        base = ["curl", "-sS", "--noproxy", "*", "--max-time", "10", "--cacert", pki("ca.pem")]
        good = base + ["--cert", pki("client.pem"), "--key", pki("client.key")]
        out = subprocess.run(good + ["-u", f"{CLIENT_ID}:{CLIENT_SECRET}", "-d", "grant_type=client_credentials",
                                     f"{self.s.base}/oauth/token"], capture_output=True, text=True, timeout=20)
        self.assertEqual(out.returncode, 0, out.stderr)
        tok = json.loads(out.stdout)["access_token"]
        t = txid(40)
        out = subprocess.run(good + ["-X", "PUT", "-H", f"Authorization: Bearer {tok}",
                                     "-H", "Content-Type: application/json", "--data-binary", json.dumps(cob_body()),
                                     "-w", "\n%{http_code}", f"{self.s.base}/cob/{t}"],
                             capture_output=True, text=True, timeout=20)
        self.assertEqual(out.returncode, 0, out.stderr)
        body, code = out.stdout.rsplit("\n", 1)
        self.assertEqual(code, "201")
        self.assertEqual(json.loads(body)["txid"], t)
        self.assertEqual(self.s.state()["charges_created"], 1)
        out = subprocess.run(base + ["--cert", pki("rogue-client.pem"), "--key", pki("rogue-client.key"),
                                     f"{self.s.base}/cob/{t}"], capture_output=True, text=True, timeout=20)
        self.assertNotEqual(out.returncode, 0)
        self.assertEqual(self.s.state()["requests"].get("GET /cob/{txid}"), None)


class PlainHttpTest(unittest.TestCase):
    def test_plain_http_control_port_base_path_and_sigterm(self):
        s = Server("plain", plain=True, control_tcp=True, extra=["--base-path", "/api/v2"])
        stopped = False
        try:
            self.assertTrue(s.base.startswith("http://"))
            tok = s.token()
            t = txid(50)
            status, _, body = s.call("PUT", f"/api/v2/cob/{t}", cob_body(), s.bearer(tok))
            self.assertEqual(status, 201, body)
            self.assertEqual(s.call("GET", f"/api/v2/cob/{t}", None, s.bearer(tok))[0], 200)
            self.assertEqual(s.call("GET", f"/cob/{t}", None, s.bearer(tok))[0], 404)  # outside the base path
            s.faults({"path": "/cob/", "fault": "status", "status": 429, "retry_after": "2", "times": 1})
            status, h, _ = s.call("GET", f"/api/v2/cob/{t}", None, s.bearer(tok))
            self.assertEqual((status, h["Retry-After"]), (429, "2"))
            st = s.state()
            self.assertEqual(st["charges_created"], 1)
            self.assertEqual(st["requests"]["GET /cob/{txid}"], 2)
            # a TLS client cannot talk to it
            with self.assertRaises((ssl.SSLError, ConnectionError)):
                s.call("GET", f"/api/v2/cob/{t}", None, s.bearer(tok), ctx=client_context(),
                       base=f"https://localhost:{s.port}")
            t0 = time.monotonic()
            rc = s.stop()
            stopped = True
            self.assertEqual(rc, 0, s.log_text())
            self.assertLess(time.monotonic() - t0, 5)
            self.assertIn("stopped", s.log_text())
        finally:
            if not stopped:
                s.stop()

    def test_sigterm_removes_the_control_socket(self):
        s = Server("sigterm", plain=True)
        self.assertTrue(os.path.exists(s.control_socket))
        # a connection held by a timeout fault must not delay the exit
        s.faults({"fault": "timeout", "seconds": 60})
        holder = threading.Thread(target=lambda: self.assertRaises(Exception, s.token_call, timeout=30), daemon=True)
        holder.start()
        deadline = time.monotonic() + 3
        while s.state()["faults_applied"] < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        t0 = time.monotonic()
        self.assertEqual(s.stop(), 0, s.log_text())
        self.assertLess(time.monotonic() - t0, 5)
        self.assertFalse(os.path.exists(s.control_socket))
        holder.join(5)


def main():
    verbosity = 2 if "-v" in sys.argv[1:] else 1
    t0 = time.monotonic()
    suite = unittest.defaultTestLoader.loadTestsFromModule(sys.modules[__name__])
    result = unittest.TextTestRunner(verbosity=verbosity, stream=sys.stderr).run(suite)
    failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
    skipped = len(result.skipped)
    passed = result.testsRun - failed - skipped
    if failed and MAIN_LOG:
        tail = MAIN_LOG.splitlines()[-40:]
        print("--- last lines of the main server's log ---\n" + "\n".join(tail), file=sys.stderr)
    print(f"pix_server_test: {passed} passed, {failed} failed, {skipped} skipped "
          f"({time.monotonic() - t0:.1f} s)")
    return 0 if failed == 0 and result.testsRun > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
