"""WhatsApp webhook helpers and the seen, done and forget ops, offline.

`seen`, `seen_batch`, `done`, `forget` and `first_sightings` run here
against FakeSeenAgent below, a tiny Unix-socket server that answers per the
ops' contract on a clock the tests can move (lease and record expiry in no
time, errors on demand); tests/test_client.py runs the same ops against the
real agent. The signature check, the extraction and the example receiver
need no agent at all.
"""

from __future__ import annotations

import copy
import hashlib
import hmac
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import intentd_client as ic  # noqa: E402
from intentd_client import webhook  # noqa: E402
from intentd_client.webhook import (first_sightings, first_sightings_async,  # noqa: E402
                                    message_ids, verify_signature)

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "examples", "webhook_receiver.py")

# The test vector GitHub documents for X-Hub-Signature-256 (same scheme as
# Meta's: "sha256=" + hex HMAC-SHA256 of the raw body), docs.github.com,
# "Validating webhook deliveries", section "Testing the webhook payload
# validation" (github/docs: content/webhooks/using-webhooks/
# validating-webhook-deliveries.md). Checked independently with
#   printf '%s' 'Hello, World!' | openssl dgst -sha256 -hmac "It's a Secret to Everybody"
GITHUB_SECRET = "It's a Secret to Everybody"
GITHUB_PAYLOAD = b"Hello, World!"
GITHUB_SIGNATURE = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"

W1 = "wamid.HBgLMTY1MDU1NTEyMzQVAgASGBQzQTRBNjU5OUFFRTAzODEwMTQ0RgA="
W2 = "wamid.HBgNNTUxMTk4NzY1NDMyMRUCABIYFDNBMkM2NjE5QjQ1RTBFQTk0N0Q4AA=="
W3 = "wamid.HBgNNTUyMTk5ODc2NTQzMhUCABIYFjNFQjBDNzU2MkI3RjE2NjBBODQzQTEA"
OUT1 = "wamid.HBgLMTY1MDU1NTEyMzQVAgARGBI5QTNDQTVCM0Q0Q0Q2RTY3RTcA"
OUT2 = "wamid.HBgNNTUyMTk5ODc2NTQzMhUCABEYEjQ1NjdBQkNERUYwMTIzNDU2AA=="

# Two business accounts in one delivery, as the Cloud API sends them:
# inbound messages with their contacts, statuses of sent messages (two
# statuses of one message), and a change of another field.
BODY = {
    "object": "whatsapp_business_account",
    "entry": [
        {"id": "102290129340398", "changes": [
            {"field": "messages", "value": {
                "messaging_product": "whatsapp",
                "metadata": {"display_phone_number": "15550783881",
                             "phone_number_id": "106540352242922"},
                "contacts": [{"profile": {"name": "Sheena Nelson"}, "wa_id": "16505551234"},
                             {"profile": {"name": "Ana Souza"}, "wa_id": "5511987654321"}],
                "messages": [
                    {"from": "16505551234", "id": W1, "timestamp": "1749416383",
                     "type": "text", "text": {"body": "Quero pagar a fatura FAT-2026-000123"}},
                    {"from": "5511987654321", "id": W2, "timestamp": "1749416390",
                     "type": "image", "image": {"mime_type": "image/jpeg",
                                                "id": "1003383421387256"}}]}},
            {"field": "messages", "value": {
                "messaging_product": "whatsapp",
                "metadata": {"display_phone_number": "15550783881",
                             "phone_number_id": "106540352242922"},
                "statuses": [
                    {"id": OUT1, "status": "sent", "timestamp": "1749416400",
                     "recipient_id": "16505551234",
                     "conversation": {"id": "a75d17ad06104c51166f948319b03c6a",
                                      "origin": {"type": "service"}},
                     "pricing": {"billable": True, "pricing_model": "CBP",
                                 "category": "service"}},
                    {"id": OUT1, "status": "delivered", "timestamp": "1749416401",
                     "recipient_id": "16505551234"}]}}]},
        {"id": "110200345501442", "changes": [
            {"field": "message_template_status_update", "value": {
                "event": "APPROVED", "message_template_id": 1234567890,
                "message_template_name": "fatura_vencida", "reason": None}},
            {"field": "messages", "value": {
                "messaging_product": "whatsapp",
                "metadata": {"display_phone_number": "5511940001234",
                             "phone_number_id": "116829341022093"},
                "contacts": [{"profile": {"name": "Carlos Lima"}, "wa_id": "5521998765432"}],
                "messages": [
                    {"from": "5521998765432", "id": W3, "timestamp": "1749416410",
                     "type": "interactive",
                     "context": {"from": "5511940001234", "id": OUT2},
                     "interactive": {"type": "button_reply",
                                     "button_reply": {"id": "pay-now", "title": "Pagar"}}}],
                "statuses": [
                    {"id": OUT2, "status": "read", "timestamp": "1749416405",
                     "recipient_id": "5521998765432"}]}}]}]}

BODY_KEYS = [("message", W1), ("message", W2), ("status", OUT1 + ":sent"),
             ("status", OUT1 + ":delivered"), ("message", W3), ("status", OUT2 + ":read")]


def sign(secret: str, raw: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), raw, hashlib.sha256).hexdigest()


def body_with_messages(ids):
    return {"object": "whatsapp_business_account", "entry": [{"id": "1", "changes": [
        {"field": "messages", "value": {"messaging_product": "whatsapp", "messages": [
            {"from": "5511987654321", "id": i, "type": "text", "text": {"body": "oi"}}
            for i in ids]}}]}]}


class FakeSeenAgent:
    """Answers `seen`, `done` and `forget` per their contract from an
    in-memory store. Its clock, now_ms, moves 1 ms per message; a test moves
    it further to let leases and records expire. script(req, n) may override
    an answer: bytes to send, b"" to hang up, None for the contract's answer."""

    DEFAULT_TTL_MS = 7 * 24 * 3600 * 1000

    def __init__(self, script=None):
        self.script = script
        self.requests = []
        self.line_sizes = []
        self.store = {}
        self.now_ms = 1764700000000
        self.lock = threading.Lock()
        self.dir = tempfile.mkdtemp(prefix="intentd-fake-seen-")
        self.socket = os.path.join(self.dir, "fake.sock")
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(self.socket)
        self.srv.listen(8)
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self):
        self.srv.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def _accept(self):
        while True:
            try:
                conn, _ = self.srv.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        with conn:
            for line in conn.makefile("rb"):
                req = json.loads(line)
                with self.lock:
                    self.requests.append(req)
                    self.line_sizes.append(len(line.rstrip(b"\n")))
                    n = len(self.requests)
                    out = self.script(req, n) if self.script else None
                    if out is None:
                        out = json.dumps(dict({"id": req.get("id")}, **self.answer(req)))
                        out = out.encode() + b"\n"
                if out == b"":
                    conn.shutdown(socket.SHUT_RDWR)
                    return
                conn.sendall(out)

    @staticmethod
    def error(code, message, field=None):
        err = {"code": code, "message": message}
        if field:
            err["field"] = field
        return {"ok": False, "error": err}

    def live(self, key):
        rec = self.store.get(key)
        if rec is not None and rec["expires_at_ms"] <= self.now_ms:
            del self.store[key]
            rec = None
        return rec

    def answer(self, req):
        op = req.get("op")
        if op not in ("seen", "done", "forget"):
            return self.error("unknown_op", f"unknown op {op!r}", "op")
        for name in ("tenant_id", "channel"):
            if not isinstance(req.get(name), str) or not req[name]:
                return self.error("missing_field", f"{name} is required", name)
        self.now_ms += 1
        tenant, channel = req["tenant_id"], req["channel"]
        if op == "done":
            return self.done(req)
        if op == "forget":
            if not isinstance(req.get("message_id"), str):
                return self.error("missing_field", "message_id is required", "message_id")
            key = (tenant, channel, req["message_id"])
            forgotten = self.live(key) is not None
            self.store.pop(key, None)
            return {"ok": True, "forgotten": forgotten}
        for name in ("ttl_ms", "lease_ms"):
            if name in req and (not isinstance(req[name], int) or req[name] <= 0):
                return self.error("invalid_field", f"{name} must be a positive integer", name)
        opts = (req.get("ttl_ms"), req.get("lease_ms"))
        if "messages" in req:
            if "message_id" in req:
                return self.error("invalid_field", "message_id or messages, not both",
                                  "message_id")
            msgs = req["messages"]
            if not isinstance(msgs, list) or not 1 <= len(msgs) <= 1000:
                return self.error("invalid_field", "messages must hold 1 to 1000 entries",
                                  "messages")
            if not all(isinstance(m, dict) and isinstance(m.get("message_id"), str)
                       for m in msgs):
                return self.error("invalid_field", "each message needs a message_id",
                                  "messages")
            return {"ok": True, "results": [
                dict({"message_id": m["message_id"]},
                     **self.record(tenant, channel, m["message_id"],
                                   m.get("meta", req.get("meta")), *opts))
                for m in msgs]}
        if not isinstance(req.get("message_id"), str):
            return self.error("missing_field", "message_id is required", "message_id")
        return dict({"ok": True}, **self.record(tenant, channel, req["message_id"],
                                                req.get("meta"), *opts))

    def record(self, tenant, channel, message_id, meta, ttl_ms, lease_ms):
        now = self.now_ms
        key = (tenant, channel, message_id)
        rec = self.live(key)
        first = rec is None
        if rec is None:
            rec = self.store[key] = {"first_seen_at_ms": now, "count": 0, "meta": meta,
                                     "state": "seen", "expires_at_ms": 0, "lease_token": 0,
                                     "lease_until_ms": 0}
            if lease_ms is not None:
                rec["state"] = "processing"
        elif (lease_ms is not None and rec["state"] == "processing"
              and rec["lease_until_ms"] <= now):
            first = True  # an expired claim taken over
        if first and lease_ms is not None:
            rec["lease_token"] += 1
            rec["lease_until_ms"] = now + lease_ms
        rec["count"] += 1
        rec["expires_at_ms"] = max(rec["expires_at_ms"], now + (ttl_ms or self.DEFAULT_TTL_MS))
        out = {"first": first, "state": rec["state"], "count": rec["count"],
               "first_seen_at_ms": rec["first_seen_at_ms"],
               "expires_at_ms": rec["expires_at_ms"]}
        if rec["meta"] is not None:
            out["meta"] = rec["meta"]
        if lease_ms is not None and first:
            out.update(lease_token=rec["lease_token"], lease_until_ms=rec["lease_until_ms"])
        elif lease_ms is not None and rec["state"] == "processing":
            out["retry_after_ms"] = rec["lease_until_ms"] - now
        return out

    def done(self, req):
        if not isinstance(req.get("message_id"), str):
            return self.error("missing_field", "message_id is required", "message_id")
        token = req.get("lease_token")
        if not isinstance(token, int) or isinstance(token, bool):
            return self.error("missing_field", "lease_token is required", "lease_token")
        rec = self.live((req["tenant_id"], req["channel"], req["message_id"]))
        if rec is None:
            return self.error("not_found", "no live record of this message", "message_id")
        if rec["state"] == "seen":
            return self.error("invalid_state", "a plain sighting, not a claim", "lease_token")
        if token > rec["lease_token"]:
            return self.error("invalid_state", "this lease token was never granted",
                              "lease_token")
        if rec["state"] == "done":
            if token == rec["lease_token"]:
                return {"ok": True, "state": "done"}
            return self.error("invalid_state", "done under another token", "lease_token")
        if token < rec["lease_token"]:
            return self.error("lease_lost", "a newer claim took the message over",
                              "lease_token")
        rec["state"] = "done"
        return {"ok": True, "state": "done"}


class SignatureTest(unittest.TestCase):
    def test_documented_vector(self):
        self.assertTrue(verify_signature(GITHUB_SECRET, GITHUB_PAYLOAD, GITHUB_SIGNATURE))
        self.assertTrue(verify_signature(GITHUB_SECRET.encode(), bytearray(GITHUB_PAYLOAD),
                                         GITHUB_SIGNATURE))
        self.assertTrue(verify_signature(GITHUB_SECRET, GITHUB_PAYLOAD,
                                         GITHUB_SIGNATURE.upper().replace("SHA256=", "sha256=")))

    def test_bad_signature(self):
        flipped = GITHUB_SIGNATURE[:-1] + ("0" if GITHUB_SIGNATURE[-1] != "0" else "1")
        self.assertFalse(verify_signature(GITHUB_SECRET, GITHUB_PAYLOAD, flipped))
        self.assertFalse(verify_signature(GITHUB_SECRET, b"Hello, World?", GITHUB_SIGNATURE))
        self.assertFalse(verify_signature("another secret", GITHUB_PAYLOAD, GITHUB_SIGNATURE))

    def test_wrong_prefix(self):
        digest = GITHUB_SIGNATURE[len("sha256="):]
        for header in ("sha1=" + digest, digest, "sha512=" + digest, "SHA256=" + digest,
                       "sha256:" + digest):
            self.assertFalse(verify_signature(GITHUB_SECRET, GITHUB_PAYLOAD, header), header)

    def test_missing_or_empty_header(self):
        for header in (None, "", "sha256=", "   "):
            self.assertFalse(verify_signature(GITHUB_SECRET, GITHUB_PAYLOAD, header), header)

    def test_different_length(self):
        for header in (GITHUB_SIGNATURE[:-2], GITHUB_SIGNATURE + "00",
                       GITHUB_SIGNATURE + GITHUB_SIGNATURE[7:],
                       "sha256=" + "é" * 64, "sha256=" + "zz" * 32):
            self.assertFalse(verify_signature(GITHUB_SECRET, GITHUB_PAYLOAD, header), header)

    def test_misuse_raises(self):
        with self.assertRaises(ValueError):
            verify_signature("", GITHUB_PAYLOAD, GITHUB_SIGNATURE)
        with self.assertRaises(TypeError):
            verify_signature(None, GITHUB_PAYLOAD, GITHUB_SIGNATURE)
        with self.assertRaises(TypeError):  # a str body: sign-check the raw bytes
            verify_signature(GITHUB_SECRET, GITHUB_PAYLOAD.decode(), GITHUB_SIGNATURE)

    def test_a_cloud_api_body(self):
        raw = json.dumps(BODY).encode()
        self.assertTrue(verify_signature("app-secret", raw, sign("app-secret", raw)))
        self.assertFalse(verify_signature("app-secret", raw + b" ", sign("app-secret", raw)))


class MessageIdsTest(unittest.TestCase):
    def test_multi_entry_body_in_order(self):
        events = message_ids(BODY)
        self.assertEqual([(e.kind, e.key) for e in events], BODY_KEYS)
        self.assertEqual([e.id for e in events], [W1, W2, OUT1, OUT1, W3, OUT2])
        self.assertEqual([e.status for e in events],
                         [None, None, "sent", "delivered", None, "read"])
        self.assertIs(events[0].item, BODY["entry"][0]["changes"][0]["value"]["messages"][0])
        self.assertEqual(events[1].contact["profile"]["name"], "Ana Souza")
        self.assertIsNone(events[2].contact)
        self.assertEqual(events[4].metadata["phone_number_id"], "116829341022093")
        self.assertEqual([e.entry_id for e in events], ["102290129340398"] * 4
                         + ["110200345501442"] * 2)

    def test_tolerates_missing_and_mistyped_members(self):
        body = {"entry": [
            {}, None, "x", {"changes": None}, {"changes": [None, {}, {"value": None}]},
            {"changes": [{"value": {"messages": "nope", "statuses": {"id": "x"}}}]},
            {"changes": [{"value": {
                "messages": [{"type": "text"}, {"id": ""}, {"id": 7}, {"id": "wamid.A"}],
                "statuses": [{"status": "read"}, {"id": "wamid.B"}]}}]},
            {"changes": [{"field": None, "value": {"messages": [{"id": "wamid.C"}]}}]}]}
        events = message_ids(body)
        self.assertEqual([(e.kind, e.key) for e in events],
                         [("message", "wamid.A"), ("status", "wamid.B:"), ("message", "wamid.C")])
        self.assertEqual(events[0].metadata, {})
        self.assertIsNone(events[0].entry_id)
        self.assertEqual(message_ids({}), [])
        self.assertEqual(message_ids({"object": "whatsapp_business_account", "entry": []}), [])

    def test_rejects_what_is_not_an_object(self):
        for body in (None, [], [BODY], "{}", json.dumps(BODY).encode(), 3):
            with self.assertRaises(TypeError) as cm:
                message_ids(body)
            self.assertIn("parsed JSON object", str(cm.exception))


class FakeAgentCase(unittest.TestCase):
    def agent(self, script=None) -> FakeSeenAgent:
        fake = FakeSeenAgent(script)
        self.addCleanup(fake.close)
        return fake

    def client(self, fake, **kw) -> ic.Client:
        c = ic.Client(fake.socket, timeout=5.0, reconnect_timeout=1.0, **kw)
        self.addCleanup(c.close)
        return c


class SeenTest(FakeAgentCase):
    def test_seen_first_then_again(self):
        fake = self.agent()
        c = self.client(fake)
        first = c.seen("t1", "whatsapp", W1, meta={"from": "16505551234"})
        self.assertEqual(first["first"], True)
        self.assertEqual(first["state"], "seen")
        self.assertEqual(first["count"], 1)
        self.assertEqual(first["meta"], {"from": "16505551234"})
        self.assertNotIn("lease_token", first)
        again = c.seen("t1", "whatsapp", W1, ttl_ms=604800000)
        self.assertEqual(again["first"], False)
        self.assertEqual(again["state"], "seen")
        self.assertEqual(again["count"], 2)
        self.assertEqual(again["meta"], {"from": "16505551234"})
        self.assertEqual(again["first_seen_at_ms"], first["first_seen_at_ms"])
        self.assertIsInstance(again["expires_at_ms"], int)
        self.assertEqual(c.seen("t2", "whatsapp", W1)["first"], True)  # per tenant
        self.assertEqual(c.seen("t1", "instagram", W1)["first"], True)  # per channel
        self.assertEqual(fake.requests[0], {"id": 1, "op": "seen", "tenant_id": "t1",
                                            "channel": "whatsapp", "message_id": W1,
                                            "meta": {"from": "16505551234"}})
        self.assertEqual(fake.requests[1]["ttl_ms"], 604800000)
        self.assertNotIn("meta", fake.requests[1])
        self.assertNotIn("lease_ms", fake.requests[1])

    def test_seen_batch_in_request_order(self):
        fake = self.agent()
        c = self.client(fake)
        c.seen("t1", "whatsapp", W2)
        results = c.seen_batch("t1", "whatsapp",
                               [W1, {"message_id": W2}, {"message_id": W3, "meta": {"n": 3}}],
                               ttl_ms=1000)
        self.assertEqual([(r["message_id"], r["first"]) for r in results],
                         [(W1, True), (W2, False), (W3, True)])
        self.assertEqual(results[1]["count"], 2)
        req = fake.requests[1]
        self.assertEqual(req["messages"], [{"message_id": W1}, {"message_id": W2},
                                           {"message_id": W3, "meta": {"n": 3}}])
        self.assertEqual(req["ttl_ms"], 1000)
        self.assertNotIn("message_id", req)

    def test_seen_batch_default_meta_and_repeats(self):
        fake = self.agent()
        c = self.client(fake)
        results = c.seen_batch("t1", "whatsapp", [W1, {"message_id": W2, "meta": "own"}, W1],
                               meta={"src": "hook"})
        self.assertEqual(fake.requests[0]["meta"], {"src": "hook"})
        self.assertEqual([(r["first"], r["count"], r["meta"]) for r in results],
                         [(True, 1, {"src": "hook"}), (True, 1, "own"),
                          (False, 2, {"src": "hook"})])

    def test_claim_then_done(self):
        fake = self.agent()
        c = self.client(fake)
        claim = c.seen("t1", "whatsapp", W1, lease_ms=30000)
        self.assertEqual(fake.requests[0]["lease_ms"], 30000)
        self.assertEqual((claim["first"], claim["state"], claim["lease_token"]),
                         (True, "processing", 1))
        self.assertEqual(claim["lease_until_ms"], claim["first_seen_at_ms"] + 30000)
        busy = c.seen("t1", "whatsapp", W1, lease_ms=30000)
        self.assertEqual((busy["first"], busy["state"]), (False, "processing"))
        self.assertGreater(busy["retry_after_ms"], 0)
        self.assertNotIn("lease_token", busy)
        plain = c.seen("t1", "whatsapp", W1)
        self.assertEqual((plain["first"], plain["count"]), (False, 3))
        self.assertNotIn("retry_after_ms", plain)
        self.assertEqual(c.done("t1", "whatsapp", W1, claim["lease_token"]), {"state": "done"})
        self.assertEqual(fake.requests[-1], {"id": 4, "op": "done", "tenant_id": "t1",
                                             "channel": "whatsapp", "message_id": W1,
                                             "lease_token": 1})
        self.assertEqual(c.done("t1", "whatsapp", W1, 1), {"state": "done"})  # repeated
        after = c.seen("t1", "whatsapp", W1, lease_ms=30000)
        self.assertEqual((after["first"], after["state"], after["count"]), (False, "done", 4))
        self.assertNotIn("retry_after_ms", after)

    def test_an_expired_claim_is_taken_over(self):
        fake = self.agent()
        c = self.client(fake)
        results = c.seen_batch("t1", "whatsapp", [W1, W2], lease_ms=1000)
        self.assertEqual([(r["first"], r["lease_token"]) for r in results],
                         [(True, 1), (True, 1)])
        fake.now_ms += 5000  # the processor died: its lease ran out
        again = c.seen_batch("t1", "whatsapp", [W1], lease_ms=1000)[0]
        self.assertEqual((again["first"], again["state"], again["lease_token"]),
                         (True, "processing", 2))
        with self.assertRaises(ic.LeaseLost) as cm:
            c.done("t1", "whatsapp", W1, 1)  # the dead one's token
        self.assertEqual(cm.exception.field, "lease_token")
        self.assertEqual(c.done("t1", "whatsapp", W1, 2)["state"], "done")
        # An expired claim nobody took over is still current.
        self.assertEqual(c.done("t1", "whatsapp", W2, 1)["state"], "done")

    def test_done_errors_are_typed(self):
        fake = self.agent()
        c = self.client(fake)
        with self.assertRaises(ic.NotFound) as cm:
            c.done("t1", "whatsapp", W1, 1)
        self.assertEqual(cm.exception.field, "message_id")
        c.seen("t1", "whatsapp", W1)
        with self.assertRaises(ic.InvalidState) as cm:
            c.done("t1", "whatsapp", W1, 1)  # a plain sighting
        self.assertEqual(cm.exception.field, "lease_token")
        c.seen("t1", "whatsapp", W2, lease_ms=1000)
        with self.assertRaises(ic.InvalidState):
            c.done("t1", "whatsapp", W2, 7)  # never granted
        c.forget("t1", "whatsapp", W2)
        with self.assertRaises(ic.NotFound):
            c.done("t1", "whatsapp", W2, 1)  # forgotten while processed
        with self.assertRaises(ic.MissingField) as cm:
            c.done("t1", "whatsapp", W1, None)
        self.assertEqual(cm.exception.field, "lease_token")

    def test_forget(self):
        fake = self.agent()
        c = self.client(fake)
        c.seen("t1", "whatsapp", W1)
        self.assertEqual(c.forget("t1", "whatsapp", W1), {"forgotten": True})
        self.assertEqual(fake.requests[-1], {"id": 2, "op": "forget", "tenant_id": "t1",
                                             "channel": "whatsapp", "message_id": W1})
        self.assertEqual(c.forget("t1", "whatsapp", W1), {"forgotten": False})
        again = c.seen("t1", "whatsapp", W1)
        self.assertEqual((again["first"], again["count"]), (True, 1))

    def test_forget_needs_admin_rights(self):
        def script(req, n):
            return json.dumps({"id": req["id"], "ok": False, "error": {
                "code": "forbidden", "message": "forget is an admin op"}}).encode() + b"\n"
        c = self.client(self.agent(script))
        with self.assertRaises(ic.Forbidden):
            c.forget("t1", "whatsapp", W1)

    def test_an_expired_record_reads_as_never_seen(self):
        fake = self.agent()
        c = self.client(fake)
        c.seen("t1", "whatsapp", W1, ttl_ms=1000)
        fake.now_ms += 2000
        again = c.seen("t1", "whatsapp", W1)
        self.assertEqual((again["first"], again["count"]), (True, 1))

    def test_errors_are_typed(self):
        c = self.client(self.agent())
        with self.assertRaises(ic.InvalidField) as cm:
            c.seen_batch("t1", "whatsapp", [])
        self.assertEqual(cm.exception.field, "messages")
        with self.assertRaises(ic.MissingField) as cm:
            c.seen("t1", "whatsapp", None)
        self.assertEqual(cm.exception.field, "message_id")
        with self.assertRaises(ic.InvalidField) as cm:
            c.seen("t1", "whatsapp", W1, lease_ms=0)
        self.assertEqual(cm.exception.field, "lease_ms")
        for bad in ("wamid.X", {"message_id": "wamid.X"}, [3], None):
            with self.assertRaises(TypeError):
                c.seen_batch("t1", "whatsapp", bad)

    def test_an_agent_without_the_op(self):
        c = self.client(self.agent(lambda req, n: json.dumps({
            "id": req["id"], "ok": False, "error": {
                "code": "unknown_op", "message": f'unknown op "{req["op"]}"', "field": "op"}}
        ).encode() + b"\n"))
        with self.assertRaises(ic.UnknownOp):
            c.seen("t1", "whatsapp", W1)
        with self.assertRaises(ic.UnknownOp):
            c.done("t1", "whatsapp", W1, 1)
        with self.assertRaises(ic.UnknownOp):
            c.forget("t1", "whatsapp", W1)

    def test_seen_is_not_resent_after_a_broken_connection(self):
        fake = self.agent(lambda req, n: b"")
        c = self.client(fake)
        with self.assertRaises(ic.Unavailable) as cm:
            c.seen_batch("t1", "whatsapp", [W1])
        self.assertIn("outcome is unknown", str(cm.exception))
        self.assertIn("first=false", str(cm.exception))
        self.assertEqual(len(fake.requests), 1)
        with self.assertRaises(ic.Unavailable) as cm:
            c.seen("t1", "whatsapp", W1, lease_ms=1000)
        self.assertIn("until that lease expires", str(cm.exception))
        self.assertEqual(len(fake.requests), 2)

    def test_done_and_forget_are_resent_after_a_broken_connection(self):
        def script(req, n):
            if n in (3, 5):
                fake.answer(req)  # it took effect; the answer is lost
                return b""
            return None
        fake = self.agent(script)
        c = self.client(fake)
        token = c.seen("t1", "whatsapp", W1, lease_ms=1000)["lease_token"]
        c.seen("t1", "whatsapp", W2)
        self.assertEqual(c.done("t1", "whatsapp", W1, token), {"state": "done"})
        self.assertEqual(c.forget("t1", "whatsapp", W2), {"forgotten": False})
        self.assertEqual([r["op"] for r in fake.requests],
                         ["seen", "seen", "done", "done", "forget", "forget"])
        self.assertEqual(fake.requests[2], fake.requests[3])  # the same request, same id

    def test_async_client(self):
        fake = self.agent()

        async def run():
            async with ic.AsyncClient(fake.socket, reconnect_timeout=1.0) as c:
                a = await c.seen("t1", "whatsapp", W1)
                b = await c.seen_batch("t1", "whatsapp", [W1, W2])
                events = await first_sightings_async(c, "t1", BODY)
                claim = await c.seen("t1", "whatsapp", W3 + "x", lease_ms=2000, meta=[1])
                done = await c.done("t1", "whatsapp", W3 + "x", claim["lease_token"])
                with self.assertRaises(ic.InvalidState):
                    await c.done("t1", "whatsapp", W1, 1)
                forgot = await c.forget("t1", "whatsapp", W1)
                claims = await c.seen_batch("t1", "whatsapp", [W1, W2], lease_ms=2000)
                return a, b, events, claim, done, forgot, claims
        import asyncio
        a, b, events, claim, done, forgot, claims = asyncio.run(run())
        self.assertEqual((a["first"], a["state"], a["count"]), (True, "seen", 1))
        self.assertEqual([r["first"] for r in b], [False, True])
        self.assertEqual([e.key for e in events], [k for _, k in BODY_KEYS][2:])
        self.assertEqual((claim["first"], claim["lease_token"], claim["meta"]), (True, 1, [1]))
        self.assertEqual(done, {"state": "done"})
        self.assertEqual(forgot, {"forgotten": True})
        self.assertEqual([(r["first"], r.get("lease_token")) for r in claims],
                         [(True, 1), (False, None)])
        self.assertEqual(fake.requests[-1]["lease_ms"], 2000)


class FirstSightingsTest(FakeAgentCase):
    def test_a_redelivery_yields_nothing(self):
        fake = self.agent()
        c = self.client(fake)
        events = first_sightings(c, "t1", BODY)
        self.assertEqual([(e.kind, e.key) for e in events], BODY_KEYS)
        self.assertEqual(events[0].item["text"]["body"], "Quero pagar a fatura FAT-2026-000123")
        self.assertEqual(first_sightings(c, "t1", copy.deepcopy(BODY)), [])
        self.assertEqual(len(fake.requests), 2)  # one call per delivery
        self.assertEqual(fake.requests[0]["channel"], "whatsapp")
        self.assertEqual([m["message_id"] for m in fake.requests[0]["messages"]],
                         [k for _, k in BODY_KEYS])

    def test_an_entry_the_agent_refuses_by_name_is_reported_and_the_rest_recorded(self):
        def refuse_w2_once(req, n):
            if n == 1:
                return (json.dumps(dict({"id": req["id"]}, **FakeSeenAgent.error(
                    "invalid_field", "messages[1].message_id must not be empty or blank",
                    "messages[1].message_id"))) + "\n").encode()
            return None
        fake = self.agent(refuse_w2_once)
        c = self.client(fake)
        found = first_sightings(c, "t1", body_with_messages([W1, W2, W3]))
        self.assertEqual([e.id for e in found], [W1, W3])
        self.assertEqual([(e.id, e.reason) for e in found.rejected],
                         [(W2, "messages[1].message_id must not be empty or blank")])
        self.assertEqual([m["message_id"] for m in fake.requests[1]["messages"]], [W1, W3])
        # An error that names no entry is raised as before.
        def refuse_all(req, n):
            return (json.dumps(dict({"id": req["id"]}, **FakeSeenAgent.error(
                "invalid_field", "ttl_ms must be positive", "ttl_ms"))) + "\n").encode()
        fake2 = self.agent(refuse_all)
        with self.assertRaises(ic.InvalidField):
            first_sightings(self.client(fake2), "t1", body_with_messages([W1]))

    def test_a_new_status_of_a_seen_message_is_an_event(self):
        c = self.client(self.agent())
        first_sightings(c, "t1", BODY)
        later = copy.deepcopy(BODY)
        statuses = later["entry"][0]["changes"][1]["value"]["statuses"]
        statuses.append(dict(statuses[1], status="read", timestamp="1749416460"))
        events = first_sightings(c, "t1", later)
        self.assertEqual([(e.kind, e.key, e.status) for e in events],
                         [("status", OUT1 + ":read", "read")])

    def test_a_repeat_inside_one_body_counts_once(self):
        fake = self.agent()
        c = self.client(fake)
        body = body_with_messages([W1, W2, W1])
        self.assertEqual([e.id for e in first_sightings(c, "t1", body)], [W1, W2])
        self.assertEqual([m["message_id"] for m in fake.requests[0]["messages"]], [W1, W2])

    def test_no_call_without_events(self):
        fake = self.agent()
        c = self.client(fake)
        only_template = {"object": "whatsapp_business_account",
                         "entry": [dict(BODY["entry"][1],
                                        changes=BODY["entry"][1]["changes"][:1])]}
        self.assertEqual(first_sightings(c, "t1", only_template), [])
        self.assertEqual(first_sightings(c, "t1", {}), [])
        self.assertEqual(fake.requests, [])
        with self.assertRaises(TypeError):
            first_sightings(c, "t1", json.dumps(BODY))

    def test_chunks_of_1000(self):
        fake = self.agent()
        c = self.client(fake, max_frame_bytes=None)
        ids = [f"wamid.{i:06d}" for i in range(1500)]
        self.assertEqual([e.id for e in first_sightings(c, "t1", body_with_messages(ids),
                                                        ttl_ms=5000)], ids)
        self.assertEqual([len(r["messages"]) for r in fake.requests], [1000, 500])
        self.assertEqual({r["ttl_ms"] for r in fake.requests}, {5000})

    def test_chunks_stay_within_the_frame_limit(self):
        fake = self.agent()
        c = self.client(fake)  # default limit 65536
        ids = [W1[:-10] + f"{i:08d}==" for i in range(1000)]  # ~80 KB of ids
        self.assertEqual(len(first_sightings(c, "t1", body_with_messages(ids))), 1000)
        self.assertGreater(len(fake.requests), 1)
        self.assertTrue(all(n <= 65536 for n in fake.line_sizes), fake.line_sizes)
        self.assertEqual([m["message_id"] for r in fake.requests for m in r["messages"]], ids)

    def test_a_failed_batch_keeps_the_earlier_first_sightings(self):
        def script(req, n):
            if n == 2:
                return json.dumps({"id": req["id"], "ok": False, "error": {
                    "code": "storage_error", "message": "disk full"}}).encode() + b"\n"
            return None
        c = self.client(self.agent(script), max_frame_bytes=None)
        ids = [f"wamid.{i:06d}" for i in range(1200)]
        with self.assertRaises(ic.StorageError) as cm:
            first_sightings(c, "t1", body_with_messages(ids))
        self.assertEqual([e.id for e in cm.exception.first_sightings], ids[:1000])

    def test_an_answer_that_does_not_match_is_a_protocol_error(self):
        def script(req, n):
            wrong = [{"message_id": "wamid.other", "first": True}] * len(req["messages"])
            return json.dumps({"id": req["id"], "ok": True, "results": wrong}).encode() + b"\n"
        c = self.client(self.agent(script))
        with self.assertRaises(ic.ProtocolError):
            first_sightings(c, "t1", BODY)

    def test_plain_mode_has_nothing_in_progress(self):
        c = self.client(self.agent())
        events = first_sightings(c, "t1", BODY)
        self.assertIsInstance(events, webhook.Sightings)
        self.assertEqual(events.in_progress, [])
        self.assertTrue(all(e.lease_token is None for e in events))
        c.seen_batch("t1", "whatsapp", ["wamid.CLAIMED"], lease_ms=60000)
        again = first_sightings(c, "t1", body_with_messages(["wamid.CLAIMED"]))
        self.assertEqual((again, again.in_progress), ([], []))

    def test_claim_mode_carries_the_lease_token(self):
        fake = self.agent()
        c = self.client(fake)
        events = first_sightings(c, "t1", BODY, lease_ms=30000)
        self.assertEqual([(e.kind, e.key) for e in events], BODY_KEYS)
        self.assertEqual({e.lease_token for e in events}, {1})
        self.assertTrue(all(isinstance(e.lease_until_ms, int) for e in events))
        self.assertEqual(fake.requests[0]["lease_ms"], 30000)
        # Meta redelivers while the bot still works: nothing to hand over,
        # and the result says the events are held elsewhere.
        busy = first_sightings(c, "t1", copy.deepcopy(BODY), lease_ms=30000)
        self.assertEqual(busy, [])
        self.assertEqual([e.key for e in busy.in_progress], [k for _, k in BODY_KEYS])
        self.assertTrue(all(0 < e.retry_after_ms <= 30000 for e in busy.in_progress))
        for e in events:
            self.assertEqual(c.done("t1", "whatsapp", e.key, e.lease_token), {"state": "done"})
        after = first_sightings(c, "t1", copy.deepcopy(BODY), lease_ms=30000)
        self.assertEqual((after, after.in_progress), ([], []))

    def test_claim_mode_hands_over_what_a_dead_processor_held(self):
        fake = self.agent()
        c = self.client(fake)
        first = first_sightings(c, "t1", body_with_messages([W1, W2]), lease_ms=1000)
        c.done("t1", "whatsapp", W1, first[0].lease_token)  # W2's processor dies
        fake.now_ms += 1500
        again = first_sightings(c, "t1", body_with_messages([W1, W2, W3]), lease_ms=1000)
        self.assertEqual([(e.id, e.lease_token) for e in again], [(W2, 2), (W3, 1)])
        self.assertEqual(again.in_progress, [])
        with self.assertRaises(ic.LeaseLost):
            c.done("t1", "whatsapp", W2, first[1].lease_token)

    def test_claim_mode_needs_lease_tokens(self):
        def script(req, n):
            results = [{"message_id": m["message_id"], "first": True, "state": "processing"}
                       for m in req["messages"]]
            return json.dumps({"id": req["id"], "ok": True, "results": results}).encode() + b"\n"
        c = self.client(self.agent(script))
        self.assertEqual(len(first_sightings(c, "t1", BODY)), len(BODY_KEYS))
        with self.assertRaises(ic.ProtocolError):
            first_sightings(c, "t1", BODY, lease_ms=1000)

    def test_claim_mode_async(self):
        fake = self.agent()

        async def run():
            async with ic.AsyncClient(fake.socket, reconnect_timeout=1.0) as c:
                first = await first_sightings_async(c, "t1", BODY, lease_ms=5000)
                busy = await first_sightings_async(c, "t1", BODY, lease_ms=5000)
                return first, busy
        import asyncio
        first, busy = asyncio.run(run())
        self.assertEqual([e.lease_token for e in first], [1] * len(BODY_KEYS))
        self.assertEqual((list(busy), len(busy.in_progress)), ([], len(BODY_KEYS)))

    def test_a_failed_claim_batch_keeps_the_earlier_claims(self):
        def script(req, n):
            if n == 2:
                return json.dumps({"id": req["id"], "ok": False, "error": {
                    "code": "storage_error", "message": "disk full"}}).encode() + b"\n"
            return None
        c = self.client(self.agent(script), max_frame_bytes=None)
        ids = [f"wamid.{i:06d}" for i in range(1200)]
        with self.assertRaises(ic.StorageError) as cm:
            first_sightings(c, "t1", body_with_messages(ids), lease_ms=60000)
        claimed = cm.exception.first_sightings
        self.assertEqual([e.id for e in claimed], ids[:1000])
        self.assertEqual({e.lease_token for e in claimed}, {1})

    def test_chunk_plan_counts_bytes(self):
        keys = ["k" * 100] * 3000
        chunks = list(webhook._chunks(keys, "t1", "whatsapp", None, 65536))
        self.assertEqual(sum(map(len, chunks)), 3000)
        self.assertTrue(all(len(ch) <= 1000 for ch in chunks))
        for ch in chunks:
            line = json.dumps({"id": 99999, "op": "seen", "tenant_id": "t1",
                               "channel": "whatsapp",
                               "messages": [{"message_id": k} for k in ch]},
                              separators=(",", ":"))
            self.assertLessEqual(len(line), 65536)
        claim = list(webhook._chunks(keys, "t1", "whatsapp", 604800000, 65536, 3600000))
        for ch in claim:
            line = json.dumps({"id": 10 ** 19, "op": "seen", "tenant_id": "t1",
                               "channel": "whatsapp", "ttl_ms": 604800000,
                               "lease_ms": 3600000,
                               "messages": [{"message_id": k} for k in ch]},
                              separators=(",", ":"))
            self.assertLessEqual(len(line), 65536)


class ExampleReceiverTest(FakeAgentCase):
    """examples/webhook_receiver.py as a process: handshake, signature, 200,
    first sightings printed once."""

    SECRET = "app-secret-for-tests"
    TOKEN = "verify-token-for-tests"

    def setUp(self):
        self.fake = self.agent()
        d = tempfile.mkdtemp(prefix="intentd-webhook-example-")
        self.addCleanup(shutil.rmtree, d, True)
        secret_file = os.path.join(d, "app_secret")
        with open(secret_file, "w") as f:
            f.write(self.SECRET + "\n")
        env = dict(os.environ, WHATSAPP_APP_SECRET_FILE=secret_file,
                   WHATSAPP_VERIFY_TOKEN=self.TOKEN, INTENTD_SOCKET=self.fake.socket,
                   INTENTD_TENANT="t1", WEBHOOK_PORT="0", PYTHONDONTWRITEBYTECODE="1")
        env.pop("WHATSAPP_APP_SECRET", None)
        self.proc = subprocess.Popen([sys.executable, EXAMPLE], env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.addCleanup(self.stop)
        banner = self.proc.stderr.readline().decode()
        self.assertIn("listening on http://127.0.0.1:", banner)
        self.base = banner.split("listening on ")[1].split()[0]
        self.lines = []
        threading.Thread(target=self._read_stdout, daemon=True).start()

    def stop(self):
        self.proc.kill()
        self.proc.wait()
        self.proc.stdout.close()
        self.proc.stderr.close()

    def _read_stdout(self):
        for line in self.proc.stdout:
            self.lines.append(json.loads(line))

    def http(self, method, path, data=None, headers=None):
        req = urllib.request.Request(self.base.rstrip("/") + path, data=data, method=method,
                                     headers=headers or {})
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # no $http_proxy
        try:
            with opener.open(req, timeout=5) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def wait_for(self, cond, timeout=5.0):
        deadline = time.monotonic() + timeout
        while not cond():
            self.assertLess(time.monotonic(), deadline, "timed out")
            time.sleep(0.02)

    def test_handshake(self):
        ok = self.http("GET", f"/webhook?hub.mode=subscribe&hub.verify_token={self.TOKEN}"
                              "&hub.challenge=1158201444")
        self.assertEqual(ok, (200, "1158201444"))
        self.assertEqual(self.http("GET", "/webhook?hub.mode=subscribe&hub.verify_token=nope"
                                          "&hub.challenge=1")[0], 403)
        self.assertEqual(self.http("GET", f"/webhook?hub.verify_token={self.TOKEN}"
                                          "&hub.challenge=1")[0], 403)

    def test_post(self):
        raw = json.dumps(BODY).encode()
        json_type = {"Content-Type": "application/json"}
        self.assertEqual(self.http("POST", "/webhook", raw, json_type)[0], 403)
        bad = dict(json_type, **{"X-Hub-Signature-256": sign("other", raw)})
        self.assertEqual(self.http("POST", "/webhook", raw, bad)[0], 403)
        good = dict(json_type, **{"X-Hub-Signature-256": sign(self.SECRET, raw)})
        self.assertEqual(self.http("POST", "/webhook", raw, good), (200, "ok"))
        self.wait_for(lambda: len(self.lines) == len(BODY_KEYS))
        self.assertEqual([(x["kind"], x["key"]) for x in self.lines], BODY_KEYS)
        self.assertEqual(self.lines[0]["tenant_id"], "t1")
        self.assertEqual(self.lines[0]["item"]["text"]["body"],
                         "Quero pagar a fatura FAT-2026-000123")
        # Meta redelivers: accepted, nothing new reaches the bot.
        self.assertEqual(self.http("POST", "/webhook", raw, good)[0], 200)
        self.wait_for(lambda: len(self.fake.requests) == 2)
        time.sleep(0.1)
        self.assertEqual(len(self.lines), len(BODY_KEYS))


if __name__ == "__main__":
    unittest.main()
