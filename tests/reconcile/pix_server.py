#!/usr/bin/python3
"""A local test server for the Brazilian Central Bank's API Pix (v2), immediate
charges only, for testing `intentd reconcile` against a payment provider.

It emulates what a PSP exposes to a merchant ("usuário recebedor"):

  POST /oauth/token        OAuth2 client credentials (HTTP Basic or form fields)
  PUT  /cob/{txid}         create an immediate charge (Bearer, scope cob.write)
  GET  /cob/{txid}         read it back (Bearer, scope cob.read)

over mutual TLS (a client certificate signed by --client-ca is required), or
over plain HTTP with --plain-http. Errors are RFC 7807 problem+json with the
API Pix error types (https://pix.bcb.gov.br/api/v2/error/<TipoErro>).

A control API (plain HTTP + JSON, on a Unix socket and/or a localhost port)
lets a test read the state, inject faults and change a charge's status; see
README.md in this directory.

Python 3.11 standard library only. Logs one line per request to stderr, writes
its bound port to --port-file once listening, exits 0 on SIGTERM or SIGINT.
"""

import argparse
import base64
import binascii
import copy
import datetime
import hmac
import json
import os
import re
import secrets
import select
import signal
import socket
import socketserver
import ssl
import string
import sys
import threading
import time
import urllib.parse
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ERROR_BASE = "https://pix.bcb.gov.br/api/v2/error/"
TXID_RE = re.compile(r"[a-zA-Z0-9]{26,35}")
VALOR_RE = re.compile(r"\d{1,10}\.\d{2}")
CPF_RE = re.compile(r"\d{11}")
CNPJ_RE = re.compile(r"\d{14}")
STATUSES = ("ATIVA", "CONCLUIDA", "REMOVIDA_PELO_USUARIO_RECEBEDOR", "REMOVIDA_PELO_PSP")
SCOPES = ("cob.write", "cob.read")
MAX_BODY = 1 << 20
HANDSHAKE_TIMEOUT_S = 10.0
IDLE_TIMEOUT_S = 30.0
DEFAULT_HOLD_S = 30.0
DEFAULT_EXPIRACAO = 86400
LOCATION_HOST = "pix.example.com"
ISPB = "99999999"  # the emulated payer PSP in generated end-to-end ids

FAULT_KINDS = ("status", "timeout", "slow", "bad_json", "close", "token_401")
FAULT_KEYS = {"path", "method", "fault", "times", "after", "status", "retry_after",
              "type", "title", "detail", "seconds", "delay_ms"}
AFTER_KINDS = ("status", "timeout", "slow", "close")

# Problem types and titles of the API Pix "Gerais" errors, by HTTP status.
GENERAL_ERRORS = {
    400: ("RequisicaoInvalida", "Requisição inválida"),
    403: ("AcessoNegado", "Acesso negado"),
    404: ("NaoEncontrado", "Não encontrado"),
    410: ("PermanentementeRemovido", "Permanentemente removido"),
    500: ("ErroInternoDoServidor", "Erro interno do servidor"),
    503: ("ServicoIndisponivel", "Serviço indisponível"),
    504: ("IndisponibilidadePorTempoEsgotado", "Indisponibilidade por tempo esgotado"),
}

_log_lock = threading.Lock()


def log(msg):
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]
    with _log_lock:
        sys.stderr.write(f"{stamp}Z pix_server: {msg}\n")
        sys.stderr.flush()


def now_iso():
    return (datetime.datetime.now(datetime.timezone.utc)
            .isoformat(timespec="milliseconds").replace("+00:00", "Z"))


def dumps(obj):
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def problem(status, kind=None, title=None, detail=None, violacoes=None):
    """An RFC 7807 body as the API Pix writes it: (status, headers, bytes)."""
    if kind is None:
        kind, default_title = GENERAL_ERRORS.get(
            status, GENERAL_ERRORS[500] if status >= 500 else GENERAL_ERRORS[400])
        title = title or default_title
    body = {"type": kind if kind.startswith("http") else ERROR_BASE + kind,
            "title": title or kind, "status": status}
    if detail:
        body["detail"] = detail
    if violacoes:
        body["violacoes"] = violacoes
    return status, {"Content-Type": "application/problem+json"}, dumps(body)


def json_answer(status, obj, headers=None):
    h = {"Content-Type": "application/json"}
    h.update(headers or {})
    return status, h, dumps(obj)


def crc16_ccitt(data: bytes) -> int:
    """CRC-16/CCITT-FALSE (poly 0x1021, init 0xFFFF), as the BR Code uses."""
    crc = 0xFFFF
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


def br_code(location, valor):
    """A dynamic BR Code ("Pix Copia e Cola") pointing at the location."""
    def f(tag, value):
        return f"{tag}{len(value):02d}{value}"
    payload = (f("00", "01") + f("01", "12")
               + f("26", f("00", "br.gov.bcb.pix") + f("25", location))
               + f("52", "0000") + f("53", "986") + f("54", valor) + f("58", "BR")
               + f("59", "INTENTD TESTE") + f("60", "SAO PAULO") + f("62", f("05", "***"))
               + "6304")
    return payload + f"{crc16_ccitt(payload.encode()):04X}"


def violation(prop, razao):
    return {"razao": razao, "propriedade": prop}


def validate_cob(body):
    """The violations of a CobSolicitada body (empty list when valid)."""
    v = []
    if not isinstance(body, dict):
        return [violation("cob", "O corpo da requisição não é um objeto JSON.")]
    cal = body.get("calendario")
    if cal is not None:
        if not isinstance(cal, dict):
            v.append(violation("cob.calendario", "O objeto cob.calendario não respeita o schema."))
        elif "expiracao" in cal:
            exp = cal["expiracao"]
            if not isinstance(exp, int) or isinstance(exp, bool) or exp <= 0:
                v.append(violation("cob.calendario.expiracao",
                                   "O campo cob.calendario.expiracao é igual ou menor que zero."))
    dev = body.get("devedor")
    if dev is not None:
        ok = isinstance(dev, dict)
        if ok:
            has_cpf, has_cnpj = "cpf" in dev, "cnpj" in dev
            ok = (has_cpf != has_cnpj
                  and isinstance(dev.get("nome"), str) and 0 < len(dev["nome"]) <= 200
                  and (not has_cpf or (isinstance(dev["cpf"], str) and CPF_RE.fullmatch(dev["cpf"])))
                  and (not has_cnpj or (isinstance(dev["cnpj"], str) and CNPJ_RE.fullmatch(dev["cnpj"]))))
        if not ok:
            v.append(violation("cob.devedor", "O objeto cob.devedor não respeita o schema."))
    valor = body.get("valor")
    original = valor.get("original") if isinstance(valor, dict) else None
    if not isinstance(original, str) or not VALOR_RE.fullmatch(original):
        v.append(violation("cob.valor.original", "O campo cob.valor.original não respeita o schema."))
    elif float(original) == 0:
        v.append(violation("cob.valor.original", "O campo cob.valor.original é zero."))
    elif isinstance(valor, dict) and valor.get("modalidadeAlteracao", 0) not in (0, 1):
        v.append(violation("cob.valor.modalidadeAlteracao",
                           "O campo cob.valor.modalidadeAlteracao não respeita o schema."))
    chave = body.get("chave")
    if not isinstance(chave, str) or not 0 < len(chave) <= 77:
        v.append(violation("cob.chave", "O campo cob.chave não respeita o schema."))
    sol = body.get("solicitacaoPagador")
    if sol is not None and (not isinstance(sol, str) or len(sol) > 140):
        v.append(violation("cob.solicitacaoPagador",
                           "O campo solicitacaoPagador não respeita o schema."))
    info = body.get("infoAdicionais")
    if info is not None and not (
            isinstance(info, list) and len(info) <= 50
            and all(isinstance(i, dict) and isinstance(i.get("nome"), str)
                    and isinstance(i.get("valor"), str) for i in info)):
        v.append(violation("cob.infoAdicionais", "O objeto infoAdicionais não respeita o schema."))
    if isinstance(body.get("loc"), dict) and "id" in body["loc"]:
        v.append(violation("cob.loc.id", "O location referenciado por loc.id inexiste."))
    return v


def parse_fault(raw, fault_id):
    """A validated fault rule, or raises ValueError saying what is wrong."""
    if not isinstance(raw, dict):
        raise ValueError("a fault rule must be a JSON object")
    unknown = set(raw) - FAULT_KEYS
    if unknown:
        raise ValueError(f"unknown member(s) {sorted(unknown)}; known: {sorted(FAULT_KEYS)}")
    kind = raw.get("fault")
    if kind not in FAULT_KINDS:
        raise ValueError(f"fault must be one of {list(FAULT_KINDS)}, not {kind!r}")
    rule = {"id": fault_id, "fault": kind, "path": None, "method": None,
            "times": None, "remaining": None, "applied": 0, "after": False}
    path = raw.get("path")
    if path is not None:
        if not isinstance(path, str) or not path.startswith("/"):
            raise ValueError("path must be a string starting with /")
        rule["path"] = path
    method = raw.get("method")
    if method is not None:
        if not isinstance(method, str) or not method.isalpha():
            raise ValueError("method must be an HTTP method name")
        rule["method"] = method.upper()
    times = raw.get("times")
    if times is not None:
        if not isinstance(times, int) or isinstance(times, bool) or times < 1:
            raise ValueError("times must be an integer >= 1 (omit it for forever)")
        rule["times"] = rule["remaining"] = times
    after = raw.get("after", False)
    if not isinstance(after, bool):
        raise ValueError("after must be true or false")
    if after and kind not in AFTER_KINDS:
        raise ValueError(f"after applies only to {list(AFTER_KINDS)}")
    rule["after"] = after
    if kind == "status":
        status = raw.get("status")
        if not isinstance(status, int) or isinstance(status, bool) or not 200 <= status <= 599:
            raise ValueError("a status fault needs status, an integer 200..599")
        rule["status"] = status
        if raw.get("retry_after") is not None:
            ra = raw["retry_after"]
            if isinstance(ra, bool) or not isinstance(ra, (int, str)) or not str(ra).strip():
                raise ValueError("retry_after must be a number of seconds or an HTTP date")
            rule["retry_after"] = str(ra)
        for k in ("type", "title", "detail"):
            if raw.get(k) is not None:
                if not isinstance(raw[k], str):
                    raise ValueError(f"{k} must be a string")
                rule[k] = raw[k]
    elif kind == "timeout":
        seconds = raw.get("seconds", DEFAULT_HOLD_S)
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds <= 0:
            raise ValueError("seconds must be a positive number")
        rule["seconds"] = float(seconds)
    elif kind == "slow":
        delay = raw.get("delay_ms")
        if not isinstance(delay, int) or isinstance(delay, bool) or delay < 0:
            raise ValueError("a slow fault needs delay_ms, an integer >= 0")
        rule["delay_ms"] = delay
    for k in ("status", "retry_after", "type", "title", "detail", "seconds", "delay_ms"):
        if k in raw and k not in rule:
            raise ValueError(f"{k} does not apply to a {kind} fault")
    return rule


class PixApp:
    """The emulated PSP's state. Every method takes the lock itself."""

    def __init__(self, client_id, client_secret, token_ttl, base_path):
        self.client_id = client_id
        self.client_secret = client_secret
        self.token_ttl = token_ttl
        self.base_path = base_path
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.reset()

    def reset(self):
        with self.lock:
            self.charges = {}
            self.charges_created = 0
            self.requests = Counter()
            self.tokens = {}
            self.tokens_issued = 0
            self.faults = []
            self.faults_applied = 0
            self.next_fault_id = 1
            self.next_loc = 1

    # -- routing and faults ----------------------------------------------

    def route(self, path):
        """(endpoint, template, txid) of a request path (query removed)."""
        if path == "/oauth/token":
            return "token", "/oauth/token", None
        rel = path
        if self.base_path:
            if not path.startswith(self.base_path + "/"):
                return None, path, None
            rel = path[len(self.base_path):]
        if rel.startswith("/cob/"):
            return "cob", "/cob/{txid}", urllib.parse.unquote(rel[len("/cob/"):])
        return None, path, None

    def count(self, method, template):
        with self.lock:
            self.requests[f"{method} {template}"] += 1

    def take_fault(self, method, path, template):
        rel = path[len(self.base_path):] if self.base_path and path.startswith(self.base_path + "/") else path
        with self.lock:
            for rule in self.faults:
                if rule["remaining"] == 0:
                    continue
                if rule["fault"] == "token_401" and template != "/oauth/token":
                    continue
                if rule["method"] and rule["method"] != method:
                    continue
                p = rule["path"]
                if p and not (path.startswith(p) or rel.startswith(p) or p == template):
                    continue
                if rule["remaining"] is not None:
                    rule["remaining"] -= 1
                rule["applied"] += 1
                self.faults_applied += 1
                return dict(rule)
        return None

    def add_faults(self, raw):
        items = raw if isinstance(raw, list) else [raw]
        with self.lock:
            rules = [parse_fault(r, self.next_fault_id + i) for i, r in enumerate(items)]
            self.next_fault_id += len(rules)
            self.faults.extend(rules)
            return copy.deepcopy(rules)

    def clear_faults(self):
        with self.lock:
            n = len(self.faults)
            self.faults = []
            return n

    # -- OAuth -----------------------------------------------------------

    def _secret_ok(self, cid, secret):
        return (hmac.compare_digest(cid.encode(), self.client_id.encode())
                and hmac.compare_digest(secret.encode(), self.client_secret.encode()))

    def token(self, headers, body):
        ctype = (headers.get("Content-Type") or "").split(";")[0].strip().lower()
        try:
            if ctype == "application/json":
                form = json.loads(body or b"{}")
                if not isinstance(form, dict):
                    raise ValueError
                form = {k: str(v) for k, v in form.items()}
            else:
                form = dict(urllib.parse.parse_qsl(body.decode("utf-8"), keep_blank_values=True))
        except (ValueError, UnicodeDecodeError):
            return json_answer(400, {"error": "invalid_request",
                                     "error_description": "unreadable body"})
        invalid_client = (401, {"Content-Type": "application/json",
                                "WWW-Authenticate": 'Basic realm="pix"',
                                "Cache-Control": "no-store"},
                          dumps({"error": "invalid_client"}))
        creds = []
        auth = headers.get("Authorization") or ""
        if auth[:6].lower() == "basic ":
            try:
                decoded = base64.b64decode(auth[6:].strip(), validate=True).decode("utf-8")
                cid, sep, secret = decoded.partition(":")
                if not sep:
                    raise ValueError
            except (ValueError, binascii.Error, UnicodeDecodeError):
                return invalid_client
            # RFC 6749 2.3.1 form-encodes both before Basic; many clients do not.
            basic_ok = (self._secret_ok(cid, secret) or self._secret_ok(
                urllib.parse.unquote_plus(cid), urllib.parse.unquote_plus(secret)))
            if not basic_ok:
                return invalid_client
            creds.append(True)
        if "client_id" in form or "client_secret" in form:
            if not self._secret_ok(form.get("client_id", ""), form.get("client_secret", "")):
                return invalid_client
            creds.append(True)
        if not creds:
            return invalid_client
        grant = form.get("grant_type")
        if grant is None:
            return json_answer(400, {"error": "invalid_request",
                                     "error_description": "grant_type is missing"})
        if grant != "client_credentials":
            return json_answer(400, {"error": "unsupported_grant_type"})
        scopes = list(SCOPES)
        if form.get("scope"):
            wanted = form["scope"].split()
            if any(s not in SCOPES for s in wanted):
                return json_answer(400, {"error": "invalid_scope"})
            scopes = [s for s in SCOPES if s in wanted]
        tok = secrets.token_urlsafe(32)
        with self.lock:
            self.tokens[tok] = (time.monotonic() + self.token_ttl, tuple(scopes))
            self.tokens_issued += 1
        return json_answer(200, {"access_token": tok, "token_type": "Bearer",
                                 "expires_in": self.token_ttl, "scope": " ".join(scopes)},
                           {"Cache-Control": "no-store", "Pragma": "no-cache"})

    def bearer_scopes(self, headers):
        auth = headers.get("Authorization") or ""
        if auth[:7].lower() != "bearer ":
            return None
        with self.lock:
            entry = self.tokens.get(auth[7:].strip())
        if entry is None or entry[0] < time.monotonic():
            return None
        return entry[1]

    def revoke_tokens(self):
        with self.lock:
            n = len(self.tokens)
            self.tokens = {}
            return n

    # -- charges -----------------------------------------------------------

    def cob(self, method, txid, query, headers, body):
        if method not in ("GET", "PUT"):
            s, h, b = problem(405, "RequisicaoInvalida", "Método não suportado",
                              f"Este servidor de testes atende GET e PUT em /cob/{{txid}}, não {method}.")
            h["Allow"] = "GET, PUT"
            return s, h, b
        scopes = self.bearer_scopes(headers)
        if scopes is None:
            s, h, b = problem(401, "AcessoNegado", "Não autorizado",
                              "Token de acesso ausente, inválido ou expirado.")
            h["WWW-Authenticate"] = 'Bearer realm="pix"'
            return s, h, b
        need = "cob.write" if method == "PUT" else "cob.read"
        if need not in scopes:
            return problem(403, "AcessoNegado", "Acesso negado", f"O token não tem o escopo {need}.")
        op_invalid = "CobOperacaoInvalida" if method == "PUT" else "CobConsultaInvalida"
        if not TXID_RE.fullmatch(txid):
            return problem(400, op_invalid, "Cobrança inválida." if method == "PUT" else "Consulta inválida.",
                           "O txid não respeita o schema [a-zA-Z0-9]{26,35}.",
                           [violation("txid", "O campo txid não respeita o schema.")])
        if method == "GET":
            with self.lock:
                charge = copy.deepcopy(self.charges.get(txid))
            if charge is None:
                return problem(404, "CobNaoEncontrado", "Cobrança não encontrada.",
                               f"Cobrança não encontrada para o txid {txid}.")
            rev = urllib.parse.parse_qs(query).get("revisao")
            if rev and rev[-1] != str(charge["revisao"]):
                return problem(400, "CobConsultaInvalida", "Consulta inválida.",
                               "A revisão pedida não existe.",
                               [violation("revisao", "O parâmetro revisao corresponde a uma revisão inexistente.")])
            return json_answer(200, charge)
        try:
            req = json.loads(body.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            req = None
        viol = validate_cob(req)
        if viol:
            return problem(400, "CobOperacaoInvalida", "Cobrança inválida.",
                           "A requisição que busca criar a cobrança não respeita o schema.", viol)
        with self.lock:
            if txid in self.charges:
                return problem(400, "CobOperacaoInvalida", "Cobrança inválida.",
                               f"Já existe uma cobrança com o txid {txid}.",
                               [violation("txid", "A cobrança já existe.")])
            loc_id = self.next_loc
            self.next_loc += 1
            created = now_iso()
            location = f"{LOCATION_HOST}/qr/v2/{secrets.token_hex(16)}"
            valor = {"original": req["valor"]["original"]}
            if "modalidadeAlteracao" in req["valor"]:
                valor["modalidadeAlteracao"] = req["valor"]["modalidadeAlteracao"]
            charge = {
                "calendario": {"criacao": created,
                               "expiracao": (req.get("calendario") or {}).get("expiracao", DEFAULT_EXPIRACAO)},
                "txid": txid,
                "revisao": 0,
                "loc": {"id": loc_id, "location": location, "tipoCob": "cob", "criacao": created},
                "location": location,
                "status": "ATIVA",
            }
            if req.get("devedor") is not None:
                charge["devedor"] = req["devedor"]
            charge["valor"] = valor
            charge["chave"] = req["chave"]
            if req.get("solicitacaoPagador") is not None:
                charge["solicitacaoPagador"] = req["solicitacaoPagador"]
            if req.get("infoAdicionais") is not None:
                charge["infoAdicionais"] = req["infoAdicionais"]
            charge["pixCopiaECola"] = br_code(location, valor["original"])
            self.charges[txid] = charge
            self.charges_created += 1
            return json_answer(201, copy.deepcopy(charge))

    def set_status(self, txid, req):
        """Control API: (http status, answer)."""
        if not isinstance(req, dict) or req.get("status") not in STATUSES:
            return 400, {"error": f"status must be one of {list(STATUSES)}"}
        with self.lock:
            charge = self.charges.get(txid)
            if charge is None:
                return 404, {"error": f"no charge with txid {txid}"}
            charge["status"] = req["status"]
            if req["status"] == "CONCLUIDA":
                stamp = datetime.datetime.now(datetime.timezone.utc)
                e2e = req.get("endToEndId") or ("E" + ISPB + stamp.strftime("%Y%m%d%H%M") + "".join(
                    secrets.choice(string.ascii_letters + string.digits) for _ in range(11)))
                charge["pix"] = [{
                    "endToEndId": e2e,
                    "txid": txid,
                    "valor": req.get("valor") or charge["valor"]["original"],
                    "horario": now_iso(),
                }]
            else:
                charge.pop("pix", None)
            return 200, copy.deepcopy(charge)

    def state(self):
        with self.lock:
            return {
                "charges": copy.deepcopy(self.charges),
                "charges_created": self.charges_created,
                "requests": dict(sorted(self.requests.items())),
                "tokens_issued": self.tokens_issued,
                "tokens_live": len(self.tokens),
                "faults": copy.deepcopy(self.faults),
                "faults_applied": self.faults_applied,
            }


class _BodyError(Exception):
    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


def read_body(handler):
    te = (handler.headers.get("Transfer-Encoding") or "").lower()
    if "chunked" in te:
        parts, total = [], 0
        while True:
            line = handler.rfile.readline(1024)
            try:
                size = int(line.split(b";")[0].strip(), 16)
            except ValueError:
                raise _BodyError(400, "bad chunk size") from None
            if size == 0:
                while handler.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                    pass
                return b"".join(parts)
            total += size
            if total > MAX_BODY:
                raise _BodyError(413, "body too large")
            parts.append(handler.rfile.read(size))
            handler.rfile.readline(16)
    length = handler.headers.get("Content-Length")
    if length is None:
        return b""
    try:
        n = int(length)
    except ValueError:
        raise _BodyError(400, "bad Content-Length") from None
    if n < 0:
        raise _BodyError(400, "bad Content-Length")
    if n > MAX_BODY:
        raise _BodyError(413, "body too large")
    return handler.rfile.read(n)


class ApiHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "intentd-pix-test-server"
    sys_version = ""
    timeout = IDLE_TIMEOUT_S

    def log_request(self, code="-", size="-"):
        pass  # one line per request is written by dispatch()

    def log_message(self, fmt, *args):
        log(f"api {self.client_address[0]}:{self.client_address[1]} {fmt % args}")

    def do_GET(self):
        self.dispatch()

    do_PUT = do_POST = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = do_GET

    def dispatch(self):
        app = self.server.app
        t0 = time.monotonic()
        method = self.command
        split = urllib.parse.urlsplit(self.path)
        path = split.path
        endpoint, template, txid = app.route(path)
        app.count(method, template)
        note = "-"
        try:
            try:
                body = read_body(self)
            except _BodyError as e:
                self.close_connection = True
                self.send(*problem(e.status, detail=str(e)))
                return self._done(t0, e.status, note)
            rule = app.take_fault(method, path, template)
            if rule:
                note = f"fault#{rule['id']}:{rule['fault']}" + (":after" if rule["after"] else "")
            if rule and not rule["after"]:
                kind = rule["fault"]
                if kind == "slow":
                    self.sleep(rule["delay_ms"] / 1000.0)
                elif kind == "status":
                    self.send(*self.fault_answer(rule))
                    return self._done(t0, rule["status"], note)
                elif kind == "token_401":
                    self.send(401, {"Content-Type": "application/json",
                                    "WWW-Authenticate": 'Basic realm="pix"',
                                    "Cache-Control": "no-store"},
                              dumps({"error": "invalid_client"}))
                    return self._done(t0, 401, note)
                elif kind == "timeout":
                    self.hold(rule["seconds"])
                    return self._done(t0, "held-then-closed", note)
                elif kind == "close":
                    self.close_connection = True
                    return self._done(t0, "closed", note)
            if endpoint == "token":
                if method != "POST":
                    status, headers, data = problem(405, detail="use POST")
                    headers["Allow"] = "POST"
                else:
                    status, headers, data = app.token(self.headers, body)
            elif endpoint == "cob":
                status, headers, data = app.cob(method, txid, split.query, self.headers, body)
            else:
                status, headers, data = problem(404, "NaoEncontrado", "Não encontrado",
                                                f"Nenhum recurso em {path}.")
            if rule and rule["after"]:
                kind = rule["fault"]
                note += f"(real {status})"
                if kind == "slow":
                    self.sleep(rule["delay_ms"] / 1000.0)
                elif kind == "status":
                    status, headers, data = self.fault_answer(rule)
                elif kind == "timeout":
                    self.hold(rule["seconds"])
                    return self._done(t0, "held-then-closed", note)
                elif kind == "close":
                    self.close_connection = True
                    return self._done(t0, "closed", note)
            if rule and rule["fault"] == "bad_json":
                note += f"(real {status})"
                status = 200
                headers = {"Content-Type": "application/json"}
                data = data[:max(1, len(data) // 2)]
            self.send(status, headers, data)
            self._done(t0, status, note, len(data))
        except (ConnectionError, TimeoutError, ssl.SSLError) as e:
            self.close_connection = True
            self._done(t0, f"client-gone({type(e).__name__})", note)

    def fault_answer(self, rule):
        status = rule["status"]
        kind = rule.get("type")
        if kind is None:
            kind = GENERAL_ERRORS.get(status, GENERAL_ERRORS[500] if status >= 500 else GENERAL_ERRORS[400])[0]
        s, h, b = problem(status, kind, rule.get("title") or GENERAL_ERRORS.get(status, (None, kind))[1],
                          rule.get("detail") or f"Falha injetada pelo servidor de testes (regra {rule['id']}).")
        if rule.get("retry_after") is not None:
            h["Retry-After"] = rule["retry_after"]
        return s, h, b

    def send(self, status, headers, data):
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        no_body = status in (204, 304) or status < 200
        if not no_body:
            self.send_header("Content-Length", str(len(data)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if not no_body and self.command != "HEAD":
            self.wfile.write(data)
        self.wfile.flush()

    def sleep(self, seconds):
        self.server.app.stopping.wait(seconds)

    def hold(self, seconds):
        """Answers nothing for `seconds` (or until the client hangs up), then
        closes the connection."""
        self.close_connection = True
        sock = self.connection
        deadline = time.monotonic() + seconds
        old = sock.gettimeout()
        sock.settimeout(0.2)
        try:
            while not self.server.app.stopping.is_set():
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                pending = isinstance(sock, ssl.SSLSocket) and sock.pending()
                if not pending:
                    readable, _, _ = select.select([sock], [], [], min(left, 0.5))
                    if not readable:
                        continue
                try:
                    if not sock.recv(4096):
                        return  # the client gave up
                except (ssl.SSLWantReadError, TimeoutError):
                    continue
                except OSError:
                    return
        finally:
            try:
                sock.settimeout(old)
            except OSError:
                pass

    def _done(self, t0, status, note, size=0):
        ms = (time.monotonic() - t0) * 1000
        log(f'api {self.client_address[0]}:{self.client_address[1]} "{self.command} {self.path}" '
            f"{status} {size}B {ms:.1f}ms {note}")


class ApiServer(ThreadingHTTPServer):
    """Accepts in the main loop; the TLS handshake happens in the connection's
    own thread, so a slow or refused client never blocks the others."""
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def __init__(self, addr, app, ssl_ctx):
        self.app = app
        self.ssl_ctx = ssl_ctx
        super().__init__(addr, ApiHandler)

    def finish_request(self, request, client_address):
        conn = request
        if self.ssl_ctx is not None:
            request.settimeout(HANDSHAKE_TIMEOUT_S)
            try:
                conn = self.ssl_ctx.wrap_socket(request, server_side=True)
            except (ssl.SSLError, OSError) as e:
                log(f"api {client_address[0]}:{client_address[1]} TLS handshake refused: {e}")
                return
        try:
            ApiHandler(conn, client_address, self)
        finally:
            if conn is not request:
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                conn.close()

    def handle_error(self, request, client_address):
        log(f"api {client_address} unexpected error: {sys.exc_info()[1]!r}")


# -- control API ---------------------------------------------------------------

class ControlHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "intentd-pix-test-control"
    sys_version = ""
    timeout = IDLE_TIMEOUT_S

    def log_request(self, code="-", size="-"):
        pass

    def log_message(self, fmt, *args):
        log(f"control {fmt % args}")

    def do_GET(self):
        self.dispatch()

    do_POST = do_DELETE = do_PUT = do_GET

    def dispatch(self):
        app = self.server.app
        path = urllib.parse.urlsplit(self.path).path
        try:
            raw = read_body(self)
            req = json.loads(raw) if raw.strip() else None
        except _BodyError as e:
            return self.answer(e.status, {"error": str(e)})
        except (ValueError, UnicodeDecodeError):
            return self.answer(400, {"error": "the body is not JSON"})
        m = self.command
        if path == "/state" and m == "GET":
            return self.answer(200, app.state())
        if path == "/faults":
            if m == "GET":
                return self.answer(200, {"faults": app.state()["faults"]})
            if m == "POST":
                try:
                    return self.answer(200, {"faults": app.add_faults(req)})
                except ValueError as e:
                    return self.answer(400, {"error": str(e)})
            if m == "DELETE":
                return self.answer(200, {"cleared": app.clear_faults()})
        if path == "/reset" and m == "POST":
            app.reset()
            return self.answer(200, {"reset": True})
        if path == "/tokens/revoke" and m == "POST":
            return self.answer(200, {"revoked": app.revoke_tokens()})
        mt = re.fullmatch(r"/charges/([^/]+)/status", path)
        if mt and m == "POST":
            return self.answer(*app.set_status(urllib.parse.unquote(mt.group(1)), req))
        return self.answer(404, {"error": f"no control endpoint {m} {path}"})

    def answer(self, status, obj):
        data = json.dumps(obj, ensure_ascii=False, indent=1).encode("utf-8") + b"\n"
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        log(f'control "{self.command} {self.path}" {status}')


class ControlTcpServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr, app):
        self.app = app
        super().__init__(addr, ControlHandler)


class ControlUnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def __init__(self, path, app):
        self.app = app
        super().__init__(path, ControlHandler)

    def server_bind(self):
        old = os.umask(0o177)
        try:
            super().server_bind()
        finally:
            os.umask(old)


def write_atomically(path, text):
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def main(argv=None):
    p = argparse.ArgumentParser(description="Local test server for the BCB API Pix (cob).")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=0, help="port, 0 for any free one (default)")
    p.add_argument("--port-file", help="file to write the bound port into once listening")
    p.add_argument("--cert", help="server certificate (PEM)")
    p.add_argument("--key", help="server private key (PEM)")
    p.add_argument("--client-ca", help="CA whose client certificates are accepted (PEM)")
    p.add_argument("--plain-http", action="store_true", help="serve plain HTTP, no TLS")
    p.add_argument("--client-id", required=True)
    p.add_argument("--client-secret-file", required=True,
                   help="file holding the client secret (one trailing newline is dropped)")
    p.add_argument("--token-ttl", type=int, default=3600, help="access token lifetime, s (default 3600)")
    p.add_argument("--base-path", default="",
                   help="prefix of the cob endpoints, e.g. /api/v2 (the token endpoint stays /oauth/token)")
    p.add_argument("--control-socket", help="Unix socket path for the control API")
    p.add_argument("--control-port", type=int,
                   help="also serve the control API on this 127.0.0.1 port (0: any free one)")
    p.add_argument("--control-port-file", help="file to write the control port into")
    a = p.parse_args(argv)

    if not a.plain_http and not (a.cert and a.key and a.client_ca):
        p.error("--cert, --key and --client-ca are required unless --plain-http")
    base = a.base_path.rstrip("/")
    if base and not base.startswith("/"):
        p.error("--base-path must start with /")
    with open(a.client_secret_file, encoding="utf-8") as f:
        secret = f.read()
    secret = secret[:-1] if secret.endswith("\n") else secret
    secret = secret[:-1] if secret.endswith("\r") else secret
    if not secret:
        p.error("the client secret file is empty")

    ctx = None
    if not a.plain_http:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(a.cert, a.key)
        ctx.load_verify_locations(cafile=a.client_ca)
        ctx.verify_mode = ssl.CERT_REQUIRED

    app = PixApp(a.client_id, secret, a.token_ttl, base)
    api = ApiServer((a.host, a.port), app, ctx)
    servers = [api]
    if a.control_socket:
        try:
            if os.path.exists(a.control_socket) and not os.path.isfile(a.control_socket):
                os.unlink(a.control_socket)
        except OSError:
            pass
        servers.append(ControlUnixServer(a.control_socket, app))
    control_tcp = None
    if a.control_port is not None:
        control_tcp = ControlTcpServer(("127.0.0.1", a.control_port), app)
        servers.append(control_tcp)

    port = api.server_address[1]
    scheme = "http" if a.plain_http else "https"
    log(f"listening on {scheme}://{a.host}:{port}{base} (client id {a.client_id}"
        + (", mutual TLS" if ctx else ", no TLS") + ")")
    if a.control_socket:
        log(f"control API on unix:{a.control_socket}")
    if control_tcp:
        log(f"control API on http://127.0.0.1:{control_tcp.server_address[1]}")
        if a.control_port_file:
            write_atomically(a.control_port_file, f"{control_tcp.server_address[1]}\n")
    if a.port_file:
        write_atomically(a.port_file, f"{port}\n")

    stop = threading.Event()

    def on_signal(signum, _frame):
        log(f"got {signal.Signals(signum).name}, stopping")
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    threads = [threading.Thread(target=s.serve_forever, kwargs={"poll_interval": 0.25},
                                daemon=True) for s in servers]
    for t in threads:
        t.start()
    while not stop.wait(1.0):
        pass
    app.stopping.set()
    for s in servers:
        s.shutdown()
        s.server_close()
    if a.control_socket:
        try:
            os.unlink(a.control_socket)
        except OSError:
            pass
    log("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
