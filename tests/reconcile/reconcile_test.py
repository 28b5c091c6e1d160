#!/usr/bin/python3
"""End-to-end test of `intentd reconcile` against the local API Pix server.

Starts a private agent (`intentd serve`, its config holding a "reconcile"
member), the API Pix test server (tests/reconcile/pix_server.py, mutual TLS
with a PKI made at test time, OAuth2, faults on demand), and plays bots over
the agent's socket: a bot begins a pix.cobranca intent with a one-second
lease, creates the charge at the server (PUT /cob/{txid}, txid the key's
first 35 characters) or not, and dies without reporting. Once the lease has
run out the action is uncertain, and `intentd reconcile --once --json` must
resolve it from the provider's record:

  a. charged, worker killed: completed with the charge as the response; the
     next begin replays it
  b. killed before the charge: released; the next begin executes with the
     same key and txid and charges once
  c. provider faults (500, timeout, token endpoint 401, an untrusted server
     certificate): nothing recorded, no lease taken, exit 4; resolved by a
     pass after the fault. A fault on the second question (asked under the
     reconciler's lease after a 404): nothing recorded, the lease is left
     to run out
  d. the old worker comes back while the reconciler holds the action and
     asks again: its report gets lease_lost, the charge it made is found and
     completed
  e. --dry-run: asks, reports, records nothing, takes no lease
  f. a command hook for another action type: completed, failed,
     not_executed, unknown; an action type with no provider
  g. serve --reconcile-every 1s resolves a charged action by itself
  h. --limit, exit codes, refused configurations
  z. across the whole test: the provider holds exactly one charge per intent
     a bot charged, and each of those actions completed with that charge

Usage: reconcile_test.py --intentd BINARY [--source-dir DIR] [unittest options]
(or INTENTD_BINARY and INTENTD_SOURCE_DIR in the environment). Python 3
standard library only, and the openssl command (make_test_pki.sh).
"""

import base64
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
import time
import unittest
import urllib.parse

INTENTD = None
SOURCE_DIR = None
HERE = os.path.dirname(os.path.abspath(__file__))

CLIENT_ID = "intentd-reconcile"
CLIENT_SECRET = "s3cr3t/with=odd.chars"
BASE_PATH = "/api/v2"
HMAC_KEY = os.urandom(32).hex()
LEASE_MS = 1000
START_TIMEOUT_S = 20.0
RECONCILE_TIMEOUT_S = 30.0

JSON_MEMBERS = ("tenant_id", "key", "txid", "action_type", "intent_ref", "provider",
                "provider_said", "recorded", "cause", "detail", "dry_run")

TMP = None
PKI = None
SERVER = None
AGENT = None
CONFIG = None          # the main agent's config, also reconcile's default here
HOOK_DIR = None
# Every charge a bot created at the server: (agent, tenant_id, key, txid).
CHARGED = []


def pki(name):
    return os.path.join(PKI, name)


def write_private(path, text):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(path, 0o600)


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=1)
    return path


def pix_payload(ref, valor="180.00", cliente="01J9ZQ3K8V7M2N4P6R8T0W2Y4A"):
    return {"cliente_id": cliente, "valor": valor, "chave_pix_destino": "111.444.777-35",
            "referencia_intencao": ref}


# ---- the API Pix server -------------------------------------------------------

class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=10):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.unix_path)


class PixServer:
    """pix_server.py with mutual TLS, the API under /api/v2, control API on a
    Unix socket; the bots' side of it (token, PUT /cob)."""

    def __init__(self, directory):
        os.makedirs(directory)
        self.port_file = os.path.join(directory, "port")
        self.control_socket = os.path.join(directory, "control.sock")
        self.secret_file = os.path.join(directory, "client-secret")
        write_private(self.secret_file, CLIENT_SECRET + "\n")
        self.log_path = os.path.join(directory, "server.log")
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, os.path.join(SOURCE_DIR, "tests", "reconcile", "pix_server.py"),
             "--port", "0", "--port-file", self.port_file,
             "--cert", pki("server.pem"), "--key", pki("server.key"),
             "--client-ca", pki("ca.pem"), "--client-id", CLIENT_ID,
             "--client-secret-file", self.secret_file, "--base-path", BASE_PATH,
             "--control-socket", self.control_socket],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_TIMEOUT_S
        while not os.path.exists(self.port_file):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the API Pix server did not start:\n" + self.log_text())
            time.sleep(0.02)
        with open(self.port_file) as f:
            self.port = int(f.read())
        self.origin = "https://127.0.0.1:%d" % self.port
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        self.ctx.load_verify_locations(cafile=pki("ca.pem"))
        self.ctx.load_cert_chain(pki("client.pem"), pki("client.key"))
        self.bot_token = None

    def log_text(self):
        if not self.log.closed:
            self.log.flush()
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")[-6000:]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if not self.log.closed:
            self.log.close()

    def control(self, method, path, obj=None):
        conn = UnixHTTPConnection(self.control_socket)
        try:
            body = None if obj is None else json.dumps(obj).encode()
            headers = {"Content-Type": "application/json"} if body is not None else {}
            conn.request(method, path, body=body, headers=headers)
            resp = conn.getresponse()
            data = json.loads(resp.read())
            if resp.status != 200:
                raise AssertionError("control %s %s: %d %s" % (method, path, resp.status, data))
            return data
        finally:
            conn.close()

    def state(self):
        return self.control("GET", "/state")

    def fault(self, **rule):
        return self.control("POST", "/faults", rule)

    def clear_faults(self):
        self.control("DELETE", "/faults")

    def gets(self):
        return self.state()["requests"].get("GET /cob/{txid}", 0)

    def _https(self, method, path, body, headers):
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ctx, timeout=10)
        try:
            conn.request(method, path, body=body, headers=headers)
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()

    def token(self):
        """A bot's OAuth2 client-credentials token, over mutual TLS."""
        if self.bot_token is None:
            basic = base64.b64encode(("%s:%s" % (CLIENT_ID, CLIENT_SECRET)).encode()).decode()
            status, body = self._https(
                "POST", "/oauth/token",
                urllib.parse.urlencode({"grant_type": "client_credentials"}).encode(),
                {"Authorization": "Basic " + basic,
                 "Content-Type": "application/x-www-form-urlencoded"})
            if status != 200:
                raise AssertionError("token: %d %r" % (status, body))
            self.bot_token = json.loads(body)["access_token"]
        return self.bot_token

    def put_cob(self, txid, begun):
        """The bot's charge, from the frozen intent of a begin answer: the
        amount from money (whole units), the rest from input."""
        frozen = begun["input"]
        body = {"calendario": {"expiracao": 3600},
                "devedor": {"cpf": "11144477735", "nome": "Fulano de Tal"},
                "valor": {"original": begun["money"]["valor"]},
                "chave": frozen["chave_pix_destino"],
                "solicitacaoPagador": "Fatura " + frozen["referencia_intencao"]}
        status, data = self._https("PUT", BASE_PATH + "/cob/" + txid, json.dumps(body).encode(),
                                   {"Authorization": "Bearer " + self.token(),
                                    "Content-Type": "application/json"})
        return status, json.loads(data)


# ---- the agent ----------------------------------------------------------------

class Agent:
    """A private `intentd serve`."""

    def __init__(self, directory, config, extra=()):
        os.makedirs(directory)
        self.socket_path = os.path.join(directory, "s.sock")
        self.log_path = os.path.join(directory, "agent.log")
        self.log = open(self.log_path, "wb")
        env = dict(os.environ, IDEMPOTENCY_HMAC_KEY=HMAC_KEY)
        env.pop("CREDENTIALS_DIRECTORY", None)
        env.pop("INTENTD_SOCKET", None)
        self.proc = subprocess.Popen(
            [INTENTD, "serve", "--socket", self.socket_path,
             "--data-dir", os.path.join(directory, "data"), "--config", config,
             "--wal-spares", "off", "--min-free-space", "0", "--workers", "4",
             "--log-level", "warning"] + list(extra),
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT, env=env)
        self.sock = None
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError("the agent exited with %s at start:\n%s"
                                   % (self.proc.returncode, self.log_text()))
            try:
                self._connect()
                break
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("the agent did not listen:\n" + self.log_text())
                time.sleep(0.05)

    def _connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(10)
            s.connect(self.socket_path)
        except OSError:
            s.close()
            raise
        self.sock = s
        self.reader = s.makefile("rb")

    def log_text(self):
        if not self.log.closed:
            self.log.flush()
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")[-6000:]

    def call(self, **request):
        self.sock.sendall(json.dumps(request).encode() + b"\n")
        line = self.reader.readline()
        if not line:
            raise AssertionError("the agent closed the connection")
        return json.loads(line)

    def ok(self, **request):
        answer = self.call(**request)
        if not answer.get("ok"):
            raise AssertionError("%s: %s" % (request.get("op"), answer))
        return answer

    def status(self, tenant, key):
        return self.ok(op="status", tenant_id=tenant, key=key)["action"]

    def uncertain_keys(self, tenant):
        return {a["key"] for a in self.ok(op="uncertain", tenant_id=tenant)["actions"]}

    def wait_uncertain(self, tenant, keys, timeout=5.0):
        """Until every key is listed by `uncertain` (its lease ran out)."""
        keys = set(keys)
        deadline = time.monotonic() + timeout
        while True:
            listed = self.uncertain_keys(tenant)
            if keys <= listed:
                return
            if time.monotonic() > deadline:
                raise AssertionError("not uncertain after %.0f s: %s" % (timeout, keys - listed))
            time.sleep(0.05)

    def metrics(self):
        """{(name, frozenset(labels)): value}."""
        out = {}
        for line in self.ok(op="metrics")["text"].splitlines():
            if not line or line.startswith("#"):
                continue
            m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)", line)
            if not m:
                continue
            labels = frozenset(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
            out[(m.group(1), labels)] = float(m.group(4))
        return out

    def stop(self):
        if self.sock is not None:
            self.reader.close()
            self.sock.close()
            self.sock = None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if not self.log.closed:
            self.log.close()
        return self.proc.returncode


def metric(m, name, **labels):
    return m.get((name, frozenset(labels.items())), 0.0)


def metric_sum(m, name):
    return sum(v for (n, _), v in m.items() if n == name)


# ---- configurations -----------------------------------------------------------

BOLETO = {"fields": [{"name": "cliente_id", "kind": "text"},
                     {"name": "valor", "kind": "money"},
                     {"name": "linha_digitavel", "kind": "trim"}]}


def pix_api(**override):
    settings = {"base_url": SERVER.origin + BASE_PATH,
                "token_url": SERVER.origin + "/oauth/token",
                "client_id": CLIENT_ID,
                "client_secret_file": SERVER.secret_file,
                "cert_file": pki("client.pem"),
                "key_file": pki("client.key"),
                "ca_file": pki("ca.pem"),
                "timeout_ms": 2000}
    settings.update(override)
    return settings


def make_config(name, pix=None, hook=True, **extra):
    """A config file: the boleto.cobranca action type, and a "reconcile"
    member with pix.cobranca (the API Pix) and boleto.cobranca (the hook)."""
    reconcile = {"pix.cobranca": {"pix_api": pix if pix is not None else pix_api()}}
    if hook:
        reconcile["boleto.cobranca"] = {"command": [os.path.join(HOOK_DIR, "boleto-status"),
                                                    HOOK_DIR], "timeout_ms": 5000}
    config = {"action_types": {"boleto.cobranca": BOLETO}, "reconcile": reconcile}
    config.update(extra)
    return write_json(os.path.join(TMP, name), config)


HOOK = r'''#!%s
# The operator's status script for boleto.cobranca, as the test plays it:
# appends what it was given to calls-REF.jsonl, then answers the outcome
# that outcomes.json holds for the intent.
import json, os, sys
d = sys.argv[1]
line = sys.stdin.readline()
rest = sys.stdin.read()
record = json.loads(line)
with open(os.path.join(d, "calls-" + record["intent_ref"] + ".jsonl"), "a") as f:
    f.write(json.dumps({"record": record, "more_stdin": rest, "argv": sys.argv[1:],
                        "hmac_key_in_env": "IDEMPOTENCY_HMAC_KEY" in os.environ}) + "\n")
with open(os.path.join(d, "outcomes.json")) as f:
    outcomes = json.load(f)
print(json.dumps(outcomes.get(record["intent_ref"], {"outcome": "unknown"})))
'''


def hook_calls(ref):
    """What the hook was given for intent `ref`, one entry per run."""
    try:
        with open(os.path.join(HOOK_DIR, "calls-%s.jsonl" % ref)) as f:
            return [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []


def set_hook_outcomes(outcomes):
    write_json(os.path.join(HOOK_DIR, "outcomes.json"), outcomes)


# ---- running reconcile --------------------------------------------------------

def reconcile_command(*args, socket_path=None, config=None, json_lines=True):
    cmd = [INTENTD, "reconcile", "--once", "--socket", socket_path or AGENT.socket_path,
           "--config", config or CONFIG]
    if json_lines:
        cmd.append("--json")
    return cmd + list(args)


def reconcile_env():
    # The HMAC secret is in reconcile's environment on purpose: the command
    # hook must not inherit it.
    env = dict(os.environ, IDEMPOTENCY_HMAC_KEY=HMAC_KEY)
    env.pop("INTENTD_SOCKET", None)
    return env


def parse_lines(out):
    lines = []
    for text in out.splitlines():
        if text.strip():
            lines.append(json.loads(text))
    return lines


def run_reconcile(*args, **kw):
    """(exit status, [json lines], stderr)."""
    p = subprocess.run(reconcile_command(*args, **kw), stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=RECONCILE_TIMEOUT_S,
                       env=reconcile_env())
    try:
        lines = parse_lines(p.stdout) if kw.get("json_lines", True) else p.stdout
    except ValueError:
        raise AssertionError("reconcile --json printed a line that is not JSON:\n%s\nstderr:\n%s"
                             % (p.stdout, p.stderr))
    return p.returncode, lines, p.stderr


def by_key(lines):
    return {line["key"]: line for line in lines}


# ---- the test -----------------------------------------------------------------

def setUpModule():
    global TMP, PKI, SERVER, AGENT, CONFIG, HOOK_DIR
    TMP = tempfile.mkdtemp(prefix="reconcile-e2e-")
    PKI = os.path.join(TMP, "pki")
    subprocess.run(["bash", os.path.join(SOURCE_DIR, "tests", "reconcile", "make_test_pki.sh"),
                    PKI], check=True)
    HOOK_DIR = os.path.join(TMP, "hook")
    os.mkdir(HOOK_DIR)
    hook = os.path.join(HOOK_DIR, "boleto-status")
    with open(hook, "w") as f:
        f.write(HOOK % sys.executable)
    os.chmod(hook, 0o755)
    set_hook_outcomes({})
    SERVER = PixServer(os.path.join(TMP, "pix"))
    try:
        CONFIG = make_config("intentd.json")
        AGENT = Agent(os.path.join(TMP, "agent"), CONFIG)
    except BaseException:
        SERVER.stop()
        raise


def tearDownModule():
    if AGENT is not None:
        AGENT.stop()
    if SERVER is not None:
        SERVER.stop()
    if TMP is not None:
        if os.environ.get("RECONCILE_TEST_KEEP"):
            print("kept", TMP, file=sys.stderr)
        else:
            shutil.rmtree(TMP, ignore_errors=True)


class ReconcileTest(unittest.TestCase):
    maxDiff = None

    def setUp(self):
        SERVER.clear_faults()

    def tearDown(self):
        SERVER.clear_faults()

    def run(self, result=None):
        # On a failure, the tails of the agent's and the server's logs.
        bad = (len(result.failures) + len(result.errors)) if result is not None else 0
        out = super().run(result)
        if result is not None and len(result.failures) + len(result.errors) > bad:
            sys.stderr.write("--- agent log (tail) ---\n%s\n--- API Pix server log (tail) ---\n%s\n"
                             % (AGENT.log_text(), SERVER.log_text()))
        return out

    # -- a bot ------------------------------------------------------------------

    def begin(self, tenant, ref, payload=None, action_type="pix.cobranca", agent=None,
              lease_ms=LEASE_MS):
        request = {"op": "begin", "tenant_id": tenant, "intent_ref": ref,
                   "action_type": action_type, "lease_ms": lease_ms}
        if payload is not None:
            request["payload"] = payload
        return (agent or AGENT).ok(**request)

    def bot_dies(self, tenant, ref, charge, agent=None, valor="180.00"):
        """A bot begins, creates the charge (or not) and dies without
        reporting. The begin answer."""
        b = self.begin(tenant, ref, pix_payload(ref, valor), agent=agent)
        self.assertEqual(b["decision"], "execute", b)
        self.assertEqual(b["txid"], b["key"][:35])
        if charge:
            self.bot_charges(b, tenant, agent)
        return b

    def bot_charges(self, b, tenant, agent=None):
        status, body = SERVER.put_cob(b["txid"], b)
        self.assertEqual(status, 201, body)
        CHARGED.append((agent or AGENT, tenant, b["key"], b["txid"]))
        return body

    def charge_of(self, txid):
        return SERVER.state()["charges"].get(txid)

    def check_line(self, line, b, tenant, provider, recorded, cause="", dry_run=False,
                   action_type="pix.cobranca"):
        for member in JSON_MEMBERS:
            self.assertIn(member, line, "reconcile --json line lacks %s: %s" % (member, line))
        self.assertEqual(line["tenant_id"], tenant, line)
        self.assertEqual(line["key"], b["key"], line)
        self.assertEqual(line["txid"], b["key"][:35], line)
        self.assertEqual(line["action_type"], action_type, line)
        self.assertEqual(line["provider"], provider, line)
        self.assertEqual(line["recorded"], recorded, line)
        self.assertEqual(line["cause"], cause, line)
        self.assertIs(line["dry_run"], dry_run, line)
        self.assertIsInstance(line["detail"], str, line)
        self.assertIsInstance(line["provider_said"], str, line)

    # -- a. charged, then the worker was killed ---------------------------------

    def test_a_charged_then_killed_completes(self):
        t = "t-a"
        b = self.bot_dies(t, "FAT-A-1", charge=True)
        AGENT.wait_uncertain(t, [b["key"]])
        before_m, gets = AGENT.metrics(), SERVER.gets()

        rc, lines, err = run_reconcile("--tenant", t)
        self.assertEqual(rc, 0, err)
        self.assertEqual(len(lines), 1, lines)
        self.check_line(lines[0], b, t, "pix_api", "completed")
        self.assertEqual(lines[0]["intent_ref"], "FAT-A-1")
        self.assertIn("200", lines[0]["provider_said"])
        self.assertEqual(SERVER.gets(), gets + 1)

        charge = self.charge_of(b["txid"])
        action = AGENT.status(t, b["key"])
        self.assertEqual(action["status"], "completed")
        self.assertEqual(action["lease_token"], 2)
        self.assertEqual(action["attempt"], 2)
        self.assertEqual(action["response"], charge)
        after_m = AGENT.metrics()
        self.assertEqual(metric(after_m, "intentd_reconciled_total", outcome="completed"),
                         metric(before_m, "intentd_reconciled_total", outcome="completed") + 1)

        again = self.begin(t, "FAT-A-1")
        self.assertEqual(again["decision"], "replay", again)
        self.assertEqual(again["status"], "completed")
        self.assertEqual(again["response"], charge)
        self.assertEqual(AGENT.uncertain_keys(t), set())
        # Nothing is left: a second pass lists nothing.
        rc, lines, err = run_reconcile("--tenant", t)
        self.assertEqual((rc, lines), (0, []), err)
        self.assertEqual(SERVER.state()["charges_created"], len(CHARGED))

    # -- b. killed before the charge --------------------------------------------

    def test_b_killed_before_charge_released(self):
        t = "t-b"
        b = self.bot_dies(t, "FAT-B-1", charge=False)
        AGENT.wait_uncertain(t, [b["key"]])
        before_m, gets = AGENT.metrics(), SERVER.gets()

        rc, lines, err = run_reconcile("--tenant", t)
        self.assertEqual(rc, 0, err)
        self.assertEqual(len(lines), 1, lines)
        self.check_line(lines[0], b, t, "pix_api", "released")
        self.assertIn("404", lines[0]["provider_said"])
        # Not found: asked once more under the reconciler's lease before
        # anything is recorded.
        self.assertEqual(SERVER.gets(), gets + 2)
        action = AGENT.status(t, b["key"])
        self.assertEqual(action["status"], "released")
        self.assertEqual(action["lease_token"], 2)
        self.assertIn("error", action)
        self.assertIsNone(self.charge_of(b["txid"]))
        after_m = AGENT.metrics()
        self.assertEqual(metric(after_m, "intentd_reconciled_total", outcome="released"),
                         metric(before_m, "intentd_reconciled_total", outcome="released") + 1)

        # The redelivery executes, with the same key and txid, and charges.
        again = self.begin(t, "FAT-B-1")
        self.assertEqual(again["decision"], "execute", again)
        self.assertEqual((again["key"], again["txid"]), (b["key"], b["txid"]))
        self.assertEqual(again["lease_token"], 3)
        charge = self.bot_charges(again, t)
        AGENT.ok(op="complete", tenant_id=t, key=b["key"], lease_token=3, response=charge)
        state = SERVER.state()
        self.assertEqual(list(state["charges"]).count(b["txid"]), 1)
        self.assertEqual(state["charges_created"], len(CHARGED))
        self.assertEqual(AGENT.status(t, b["key"])["status"], "completed")

    # -- c. the provider cannot answer ------------------------------------------

    def test_c_provider_faults_leave_it_uncertain(self):
        short = make_config("intentd-short-timeout.json", pix=pix_api(timeout_ms=300))
        rogue = make_config("intentd-rogue-ca.json", pix=pix_api(ca_file=pki("rogue-ca.pem")))
        cases = {}  # tenant -> [begin answer, cause]
        for name, cause in (("500", "http_5xx"), ("timeout", "timeout"), ("token", "token"),
                            ("tls", "tls")):
            t = "t-c-" + name
            cases[t] = [self.bot_dies(t, "FAT-C-" + name, charge=True), cause]
        for t, (b, _) in cases.items():
            AGENT.wait_uncertain(t, [b["key"]])
        before_m = AGENT.metrics()

        for t, (b, cause) in cases.items():
            config = CONFIG
            if t == "t-c-500":
                SERVER.fault(path="/cob/" + b["txid"], method="GET", fault="status", status=500)
            elif t == "t-c-timeout":
                SERVER.fault(path="/cob/" + b["txid"], method="GET", fault="timeout", seconds=10)
                config = short
            elif t == "t-c-token":
                SERVER.fault(path="/oauth/token", fault="token_401")
            else:
                config = rogue
            started = time.monotonic()
            rc, lines, err = run_reconcile("--tenant", t, config=config)
            elapsed = time.monotonic() - started
            SERVER.clear_faults()
            self.assertEqual(rc, 4, "%s: %s %s" % (t, lines, err))
            self.assertEqual(len(lines), 1, lines)
            self.check_line(lines[0], b, t, "pix_api", "nothing", cause)
            if t == "t-c-timeout":
                self.assertLess(elapsed, 5.0, "timeout_ms 300 was not kept")
            # Nothing written, no lease taken: still uncertain.
            action = AGENT.status(t, b["key"])
            self.assertEqual(action["status"], "started", action)
            self.assertEqual(action["lease_token"], 1, action)
            self.assertEqual(action["attempt"], 1, action)
            self.assertNotIn("response", action)
            self.assertIn(b["key"], AGENT.uncertain_keys(t))
        self.assertEqual(SERVER.state()["charges_created"], len(CHARGED))
        mid_m = AGENT.metrics()
        for outcome in ("completed", "released", "failed"):
            self.assertEqual(metric(mid_m, "intentd_reconciled_total", outcome=outcome),
                             metric(before_m, "intentd_reconciled_total", outcome=outcome))
        # Only the agent's own loop counts provider errors; this agent has none.
        self.assertEqual(metric_sum(mid_m, "intentd_reconcile_provider_errors_total"), 0)

        # The faults are gone: a pass resolves each.
        for t, (b, _) in cases.items():
            rc, lines, err = run_reconcile("--tenant", t)
            self.assertEqual(rc, 0, "%s: %s %s" % (t, lines, err))
            self.assertEqual(len(lines), 1, lines)
            self.check_line(lines[0], b, t, "pix_api", "completed")
            action = AGENT.status(t, b["key"])
            self.assertEqual(action["status"], "completed")
            self.assertEqual(action["lease_token"], 2)
            self.assertEqual(action["response"], self.charge_of(b["txid"]))
        after_m = AGENT.metrics()
        self.assertEqual(metric(after_m, "intentd_reconciled_total", outcome="completed"),
                         metric(before_m, "intentd_reconciled_total", outcome="completed") + 4)
        self.assertEqual(SERVER.state()["charges_created"], len(CHARGED))

    def test_c_unknown_under_the_lease_leaves_the_lease_to_run_out(self):
        # Not found (404), so the reconciler takes the lease and asks again;
        # the second answer is a 500: nothing is recorded and the
        # reconciler's lease is left to run out.
        t = "t-c-lease"
        b = self.bot_dies(t, "FAT-C-lease", charge=False)
        AGENT.wait_uncertain(t, [b["key"]])
        SERVER.fault(path="/cob/" + b["txid"], method="GET", fault="slow", delay_ms=0, times=1)
        SERVER.fault(path="/cob/" + b["txid"], method="GET", fault="status", status=500)
        gets = SERVER.gets()
        rc, lines, err = run_reconcile("--tenant", t, "--lease-ms", "1000")
        self.assertEqual(rc, 4, err)
        self.assertEqual(len(lines), 1, lines)
        self.check_line(lines[0], b, t, "pix_api", "nothing", "http_5xx")
        self.assertEqual(SERVER.gets(), gets + 2)
        action = AGENT.status(t, b["key"])
        self.assertEqual((action["status"], action["lease_token"]), ("started", 2), action)
        self.assertNotIn(b["key"], AGENT.uncertain_keys(t))   # the reconciler's lease
        # At least the provider's slowest answer (timeout_ms 2000) plus 5 s,
        # whatever --lease-ms says.
        self.assertGreaterEqual(action["lease_until_ms"] - action["updated_at_ms"], 7000, action)
        self.assertIsNone(self.charge_of(b["txid"]))

    # -- d. the old worker comes back -------------------------------------------

    def test_d_old_worker_gets_lease_lost(self):
        # The worker hangs (no charge yet) past its lease. The reconciler
        # finds no charge, takes the lease and asks again; while that second
        # question is under way the old worker wakes up, creates the charge
        # and reports: lease_lost. The second answer sees the charge, and the
        # reconciler completes the action with it.
        t = "t-d"
        b = self.bot_dies(t, "FAT-D-1", charge=False)
        AGENT.wait_uncertain(t, [b["key"]])
        SERVER.fault(path="/cob/" + b["txid"], method="GET", fault="slow", delay_ms=0, times=1)
        SERVER.fault(path="/cob/" + b["txid"], method="GET", fault="slow", delay_ms=1500,
                     times=1)
        gets = SERVER.gets()
        proc = subprocess.Popen(reconcile_command("--tenant", t), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=reconcile_env())
        try:
            deadline = time.monotonic() + 10
            while SERVER.gets() < gets + 2:
                if proc.poll() is not None:
                    self.fail("reconcile ended before asking the provider twice: %s"
                              % (proc.communicate(),))
                self.assertLess(time.monotonic(), deadline, "reconcile never asked again")
                time.sleep(0.02)
            held = AGENT.status(t, b["key"])
            self.assertEqual((held["status"], held["lease_token"]), ("started", 2), held)
            charge = self.bot_charges(b, t)   # the old worker's call goes through...
            late = AGENT.call(op="complete", tenant_id=t, key=b["key"], lease_token=1,
                              response=charge)   # ...but its report is fenced out
            self.assertFalse(late["ok"], late)
            self.assertEqual(late["error"]["code"], "lease_lost", late)
            renew = AGENT.call(op="renew", tenant_id=t, key=b["key"], lease_token=1)
            self.assertEqual(renew["error"]["code"], "lease_lost", renew)
            out, err = proc.communicate(timeout=RECONCILE_TIMEOUT_S)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        self.assertEqual(proc.returncode, 0, err)
        lines = parse_lines(out)
        self.assertEqual(len(lines), 1, lines)
        self.check_line(lines[0], b, t, "pix_api", "completed")
        action = AGENT.status(t, b["key"])
        self.assertEqual((action["status"], action["lease_token"]), ("completed", 2))
        self.assertEqual(action["response"], charge)
        # Once the reconciler completed it, the old token is refused as
        # invalid_state: lease_lost is for a started action (docs/protocol.md,
        # the state table).
        later = AGENT.call(op="complete", tenant_id=t, key=b["key"], lease_token=1,
                           response={"late": True})
        self.assertFalse(later["ok"], later)
        self.assertEqual(later["error"]["code"], "invalid_state", later)
        self.assertEqual(AGENT.status(t, b["key"])["response"], charge)
        self.assertEqual(SERVER.state()["charges_created"], len(CHARGED))

    # -- e. --dry-run -------------------------------------------------------------

    def test_e_dry_run_records_nothing(self):
        t = "t-e"
        charged = self.bot_dies(t, "FAT-E-1", charge=True)
        not_charged = self.bot_dies(t, "FAT-E-2", charge=False, valor="99.90")
        keys = [charged["key"], not_charged["key"]]
        AGENT.wait_uncertain(t, keys)
        before = {k: AGENT.status(t, k) for k in keys}
        before_m, gets = AGENT.metrics(), SERVER.gets()

        rc, lines, err = run_reconcile("--tenant", t, "--dry-run")
        self.assertEqual(rc, 4, err)   # with --dry-run every listed action counts
        self.assertEqual(len(lines), 2, lines)
        got = by_key(lines)
        self.check_line(got[charged["key"]], charged, t, "pix_api", "completed", dry_run=True)
        self.check_line(got[not_charged["key"]], not_charged, t, "pix_api", "released",
                        dry_run=True)
        self.assertEqual(SERVER.gets(), gets + 2)
        self.assertEqual({k: AGENT.status(t, k) for k in keys}, before)
        self.assertEqual(AGENT.uncertain_keys(t), set(keys))   # no lease taken
        after_m = AGENT.metrics()
        for outcome in ("completed", "released", "failed"):
            self.assertEqual(metric(after_m, "intentd_reconciled_total", outcome=outcome),
                             metric(before_m, "intentd_reconciled_total", outcome=outcome))

        # For real now.
        rc, lines, err = run_reconcile("--tenant", t)
        self.assertEqual(rc, 0, err)
        got = by_key(lines)
        self.check_line(got[charged["key"]], charged, t, "pix_api", "completed")
        self.check_line(got[not_charged["key"]], not_charged, t, "pix_api", "released")
        self.assertEqual(AGENT.status(t, charged["key"])["status"], "completed")
        self.assertEqual(AGENT.status(t, not_charged["key"])["status"], "released")
        again = self.begin(t, "FAT-E-2")
        self.assertEqual(again["decision"], "execute")
        charge = self.bot_charges(again, t)
        AGENT.ok(op="complete", tenant_id=t, key=again["key"], lease_token=again["lease_token"],
                 response=charge)

    # -- f. a command hook --------------------------------------------------------

    def test_f_command_hook(self):
        t = "t-f"
        outcomes = {
            "BOL-F-1": {"outcome": "completed",
                        "response": {"nosso_numero": "000123", "status": "registrado"},
                        "detail": "found"},
            "BOL-F-2": {"outcome": "not_executed"},
            "BOL-F-3": {"outcome": "failed", "error": {"reason": "boleto cancelado"}},
            "BOL-F-4": {"outcome": "unknown", "detail": "the bank is down"},
        }
        set_hook_outcomes(outcomes)
        begins = {}
        for i, ref in enumerate(sorted(outcomes), 1):
            payload = {"cliente_id": "c-42", "valor": "%d.00" % (100 + i),
                       "linha_digitavel": "23790.50400 4%04d" % i}
            b = self.begin(t, ref, payload, action_type="boleto.cobranca")
            self.assertEqual(b["decision"], "execute", b)
            begins[ref] = b
        # An action type without a "reconcile" entry.
        email = self.begin(t, "MAIL-F-1", {"cliente_id": "c-42", "template": "lembrete"},
                           action_type="email.cobranca")
        AGENT.wait_uncertain(t, [b["key"] for b in begins.values()] + [email["key"]])
        before_m = AGENT.metrics()

        rc, lines, err = run_reconcile("--tenant", t)
        self.assertEqual(rc, 4, err)
        got = by_key(lines)
        self.assertEqual(len(lines), 5, lines)
        want = {"BOL-F-1": ("completed", ""), "BOL-F-2": ("released", ""),
                "BOL-F-3": ("failed", ""), "BOL-F-4": ("nothing", "command_unknown")}
        for ref, (recorded, cause) in want.items():
            self.check_line(got[begins[ref]["key"]], begins[ref], t, "command", recorded, cause,
                            action_type="boleto.cobranca")
        self.check_line(got[email["key"]], email, t, "", "nothing", "no_provider",
                        action_type="email.cobranca")

        # What the hook was given: the action record with the frozen payload,
        # one line, its argv; not the HMAC secret. A definite answer other
        # than completed is asked for again under the reconciler's lease
        # (lease token 2) before it is recorded.
        want_calls = {"BOL-F-1": [1], "BOL-F-2": [1, 2], "BOL-F-3": [1, 2], "BOL-F-4": [1]}
        for ref, b in begins.items():
            calls = hook_calls(ref)
            self.assertEqual([c["record"]["lease_token"] for c in calls], want_calls[ref], ref)
            for call in calls:
                record = call["record"]
                self.assertEqual(call["argv"], [HOOK_DIR])
                self.assertEqual(call["more_stdin"].strip(), "")
                self.assertFalse(call["hmac_key_in_env"],
                                 "the hook inherited IDEMPOTENCY_HMAC_KEY")
                self.assertEqual(record["tenant_id"], t)
                self.assertEqual(record["key"], b["key"])
                self.assertEqual(record["txid"], b["key"][:35])
                self.assertEqual(record["intent_ref"], ref)
                self.assertEqual(record["action_type"], "boleto.cobranca")
                self.assertEqual(record["payload"], b["payload"])
        self.assertEqual(hook_calls("MAIL-F-1"), [])

        done = AGENT.status(t, begins["BOL-F-1"]["key"])
        self.assertEqual((done["status"], done["response"]),
                         ("completed", outcomes["BOL-F-1"]["response"]))
        self.assertEqual(AGENT.status(t, begins["BOL-F-2"]["key"])["status"], "released")
        failed = AGENT.status(t, begins["BOL-F-3"]["key"])
        self.assertEqual((failed["status"], failed["error"]),
                         ("failed", outcomes["BOL-F-3"]["error"]))
        unknown = AGENT.status(t, begins["BOL-F-4"]["key"])
        self.assertEqual((unknown["status"], unknown["lease_token"]), ("started", 1))
        self.assertIn(begins["BOL-F-4"]["key"], AGENT.uncertain_keys(t))
        no_provider = AGENT.status(t, email["key"])
        self.assertEqual((no_provider["status"], no_provider["lease_token"]), ("started", 1))
        after_m = AGENT.metrics()
        for outcome in ("completed", "released", "failed"):
            self.assertEqual(metric(after_m, "intentd_reconciled_total", outcome=outcome),
                             metric(before_m, "intentd_reconciled_total", outcome=outcome) + 1,
                             outcome)

        replay = self.begin(t, "BOL-F-3", action_type="boleto.cobranca")
        self.assertEqual((replay["decision"], replay["status"], replay["error"]),
                         ("replay", "failed", outcomes["BOL-F-3"]["error"]))
        again = self.begin(t, "BOL-F-2", action_type="boleto.cobranca")
        self.assertEqual((again["decision"], again["key"]), ("execute", begins["BOL-F-2"]["key"]))
        AGENT.ok(op="complete", tenant_id=t, key=again["key"], lease_token=again["lease_token"],
                 response={"nosso_numero": "000124"})

        # The bank answers again: the next pass resolves the unknown one.
        outcomes["BOL-F-4"] = {"outcome": "completed", "response": {"nosso_numero": "000126"}}
        set_hook_outcomes(outcomes)
        rc, lines, err = run_reconcile("--tenant", t)
        self.assertEqual(rc, 4, err)   # the email action is still without a provider
        got = by_key(lines)
        self.check_line(got[begins["BOL-F-4"]["key"]], begins["BOL-F-4"], t, "command",
                        "completed", action_type="boleto.cobranca")
        self.check_line(got[email["key"]], email, t, "", "nothing", "no_provider",
                        action_type="email.cobranca")
        self.assertEqual(AGENT.status(t, begins["BOL-F-4"]["key"])["response"],
                         {"nosso_numero": "000126"})
        # A bot's recover resolves the email action by hand.
        rec = self.begin(t, "MAIL-F-1", action_type="email.cobranca")
        self.assertEqual(rec["decision"], "recover")
        AGENT.ok(op="complete", tenant_id=t, key=email["key"], lease_token=rec["lease_token"],
                 response={"sent": True})
        rc, lines, err = run_reconcile("--tenant", t)
        self.assertEqual((rc, lines), (0, []), err)

    # -- g. serve --reconcile-every ----------------------------------------------

    def test_g_reconcile_every_resolves_by_itself(self):
        config = make_config("intentd-loop.json")
        loop = Agent(os.path.join(TMP, "agent-loop"), config,
                     extra=["--reconcile-every", "1s"])
        try:
            t = "t-g"
            b = self.bot_dies(t, "FAT-G-1", charge=True, agent=loop)
            # Another one whose provider keeps failing: it stays uncertain and
            # the loop counts the error.
            broken = self.bot_dies(t, "FAT-G-2", charge=False, agent=loop, valor="77.00")
            SERVER.fault(path="/cob/" + broken["txid"], method="GET", fault="status", status=503)
            deadline = time.monotonic() + 15
            while True:
                action = loop.status(t, b["key"])
                if action["status"] != "started":
                    break
                self.assertLess(time.monotonic(), deadline,
                                "serve --reconcile-every 1s did not resolve it:\n" + loop.log_text())
                time.sleep(0.1)
            self.assertEqual(action["status"], "completed", action)
            self.assertEqual(action["lease_token"], 2)
            self.assertEqual(action["response"], self.charge_of(b["txid"]))
            replay = self.begin(t, "FAT-G-1", agent=loop)
            self.assertEqual(replay["decision"], "replay")
            deadline = time.monotonic() + 10
            while True:
                m = loop.metrics()
                if metric(m, "intentd_reconcile_provider_errors_total", cause="http_5xx") >= 1:
                    break
                self.assertLess(time.monotonic(), deadline, "no provider error counted: %s"
                                % {k: v for k, v in m.items() if "reconcil" in k[0]})
                time.sleep(0.1)
            self.assertEqual(metric(m, "intentd_reconciled_total", outcome="completed"), 1)
            self.assertGreaterEqual(metric(m, "intentd_reconcile_passes_total"), 1)
            stuck = loop.status(t, broken["key"])
            self.assertEqual(stuck["status"], "started")
            self.assertIsNone(self.charge_of(broken["txid"]))
        finally:
            SERVER.clear_faults()
            status = loop.stop()
        self.assertEqual(status, 0, loop.log_text())

    # -- h. --limit, exit codes, refused configurations ---------------------------

    def test_h_limit(self):
        t = "t-h"
        first = self.bot_dies(t, "FAT-H-1", charge=True)
        second = self.bot_dies(t, "FAT-H-2", charge=True, valor="181.00")
        AGENT.wait_uncertain(t, [first["key"], second["key"]])
        rc, lines, err = run_reconcile("--tenant", t, "--limit", "1")
        self.assertEqual(rc, 4, err)   # one left beyond --limit
        self.assertEqual(len(lines), 1, lines)
        self.assertEqual(lines[0]["recorded"], "completed")
        rc, lines, err = run_reconcile("--tenant", t, "--limit", "1")
        self.assertEqual(rc, 0, err)
        self.assertEqual(len(lines), 1, lines)
        self.assertEqual(lines[0]["recorded"], "completed")
        self.assertEqual({AGENT.status(t, k["key"])["status"] for k in (first, second)},
                         {"completed"})

    def test_h_exit_codes(self):
        # Nothing uncertain: 0, and the human-readable form works too.
        rc, out, err = run_reconcile("--tenant", "t-nobody", json_lines=False)
        self.assertEqual(rc, 0, out + err)
        # The agent cannot be reached: 3.
        rc, _, err = run_reconcile("--tenant", "t-h",
                                   socket_path=os.path.join(TMP, "no-such.sock"))
        self.assertEqual(rc, 3, err)
        # Usage: 2.
        p = subprocess.run([INTENTD, "reconcile", "--once", "--no-such-option"],
                           capture_output=True, text=True, timeout=10, env=reconcile_env())
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        p = subprocess.run([INTENTD, "reconcile", "--help"], capture_output=True, text=True,
                           timeout=10, env=reconcile_env())
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("--dry-run", p.stdout + p.stderr)
        # A bad configuration: 1.
        relative = os.path.join(TMP, "intentd-relative-hook.json")
        write_json(relative, {"reconcile": {"boleto.cobranca": {"command": ["boleto-status"]}},
                              "action_types": {"boleto.cobranca": BOLETO}})
        rc, _, err = run_reconcile("--tenant", "t-h", config=relative)
        self.assertEqual(rc, 1, err)
        self.assertIn("reconcile", err)
        loose = os.path.join(TMP, "loose-secret")
        with open(loose, "w") as f:
            f.write(CLIENT_SECRET + "\n")
        os.chmod(loose, 0o644)
        open_secret = make_config("intentd-open-secret.json",
                                  pix=pix_api(client_secret_file=loose))
        rc, _, err = run_reconcile("--tenant", "t-h", config=open_secret)
        self.assertEqual(rc, 1, err)
        self.assertNotIn(CLIENT_SECRET, err)
        no_mtls = make_config("intentd-no-client-cert.json",
                              pix={k: v for k, v in pix_api().items()
                                   if k not in ("cert_file", "key_file")})
        rc, _, err = run_reconcile("--tenant", "t-h", config=no_mtls)
        self.assertEqual(rc, 1, err)

    # -- z. the issue's "done when" ----------------------------------------------

    def test_z_one_charge_per_charged_intent(self):
        state = SERVER.state()
        txids = [txid for _, _, _, txid in CHARGED]
        self.assertEqual(len(set(txids)), len(txids), "a txid was charged twice")
        self.assertEqual(state["charges_created"], len(CHARGED))
        self.assertEqual(sorted(state["charges"]), sorted(txids))
        self.assertEqual(state["requests"].get("PUT /cob/{txid}", 0), len(CHARGED))
        for agent, tenant, key, txid in CHARGED:
            if agent.sock is None:
                continue   # an agent of its own test, stopped since
            action = agent.status(tenant, key)
            self.assertEqual(action["status"], "completed", action)
            self.assertEqual(action["response"].get("txid"), txid)


def main():
    global INTENTD, SOURCE_DIR
    argv = [sys.argv[0]]
    args = sys.argv[1:]
    intentd = os.environ.get("INTENTD_BINARY")
    source = os.environ.get("INTENTD_SOURCE_DIR")
    i = 0
    while i < len(args):
        if args[i] in ("--intentd", "--source-dir") and i + 1 < len(args):
            if args[i] == "--intentd":
                intentd = args[i + 1]
            else:
                source = args[i + 1]
            i += 2
            continue
        argv.append(args[i])
        i += 1
    if not intentd:
        sys.exit("reconcile_test.py: --intentd BINARY (or INTENTD_BINARY) is required")
    INTENTD = os.path.abspath(intentd)
    SOURCE_DIR = os.path.abspath(source or os.path.join(HERE, "..", ".."))
    unittest.main(argv=argv, verbosity=2)


if __name__ == "__main__":
    main()
