"""The blocking client against a real agent: every op, typed errors, reconnect."""

from __future__ import annotations

import json
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))

import intentd_client as ic  # noqa: E402
from agent_process import AgentProcess, raw_exchange  # noqa: E402
from fixtures import cpf, pix, ref  # noqa: E402

T = "acme"
PIX = "pix.cobranca"


class AgentTestCase(unittest.TestCase):
    agent: AgentProcess

    @classmethod
    def setUpClass(cls) -> None:
        cls.agent = AgentProcess().start()

    @classmethod
    def tearDownClass(cls) -> None:
        cls.agent.cleanup()

    def setUp(self) -> None:
        self.client = ic.Client(self.agent.socket, timeout=5.0, reconnect_timeout=2.0)
        self.addCleanup(self.client.close)


class OpsTest(AgentTestCase):
    def test_ping_reports_protocol_1(self):
        r = self.client.ping()
        self.assertEqual(r["protocol"], 1)
        self.assertIsInstance(r["version"], str)
        self.assertIn(r["rules_version"], (1, 2))

    def test_derive_ignores_cpf_punctuation_and_stores_nothing(self):
        r = ref()
        a = self.client.derive(T, PIX, pix(r, chave=cpf("111222333")))
        b = self.client.derive(T, PIX, pix(r, chave=cpf("111222333", punctuated=False)))
        self.assertEqual(a["key"], b["key"])
        self.assertRegex(a["key"], r"^[0-9a-f]{64}$")
        self.assertEqual(a["txid"], a["key"][:35])
        self.assertEqual(a["payload"]["valor"], "18000")
        self.assertFalse(self.client.lookup(T, r, PIX)["found"])

    def test_derive_other_tenant_other_key(self):
        r = ref()
        self.assertNotEqual(self.client.derive("acme", PIX, pix(r))["key"],
                            self.client.derive("globex", PIX, pix(r))["key"])

    def test_freeze_writes_once_and_reports_divergence(self):
        r = ref()
        first = self.client.freeze(T, r, PIX, pix(r, valor="180.00"))
        self.assertTrue(first["created"])
        again = self.client.freeze(T, r, PIX, pix(r, valor="1800.00"))
        self.assertFalse(again["created"])
        self.assertTrue(again["diverged"])
        self.assertEqual(again["diverged_fields"], ["valor"])
        self.assertEqual(again["key"], first["key"])
        self.assertEqual(again["payload"]["valor"], "18000")

    def test_begin_complete_then_replay(self):
        r = ref()
        b = self.client.begin(T, r, PIX, pix(r))
        self.assertEqual(b["decision"], "execute")
        self.assertEqual((b["attempt"], b["lease_token"]), (1, 1))
        self.assertTrue(b["created"])
        c = self.client.complete(T, b["key"], b["lease_token"], {"charge": "ch_1", "n": 1})
        self.assertEqual(c["status"], "completed")
        # Repeating the same completion succeeds and keeps the first response.
        self.client.complete(T, b["key"], b["lease_token"], {"charge": "other"})
        again = self.client.begin(T, r, PIX)  # payload may be omitted now
        self.assertEqual(again["decision"], "replay")
        self.assertEqual(again["status"], "completed")
        self.assertEqual(again["response"], {"charge": "ch_1", "n": 1})

    def test_null_response_is_sent_and_replayed(self):
        r = ref()
        b = self.client.begin(T, r, PIX, pix(r))
        self.client.complete(T, b["key"], b["lease_token"], None)
        again = self.client.begin(T, r, PIX)
        self.assertEqual(again["decision"], "replay")
        self.assertIn("response", again)
        self.assertIsNone(again["response"])

    def test_begin_while_lease_live_is_in_flight(self):
        r = ref()
        self.client.begin(T, r, PIX, pix(r), lease_ms=60000)
        b = self.client.begin(T, r, PIX, pix(r))
        self.assertEqual(b["decision"], "in_flight")
        self.assertGreater(b["retry_after_ms"], 50000)

    def test_fail_terminal_is_replayed_and_retriable_releases(self):
        r = ref()
        b = self.client.begin(T, r, PIX, pix(r))
        f = self.client.fail(T, b["key"], 1, {"psp": "timeout before send"}, retriable=True)
        self.assertEqual(f["status"], "released")
        b2 = self.client.begin(T, r, PIX)
        self.assertEqual(b2["decision"], "execute")
        self.assertEqual((b2["attempt"], b2["lease_token"]), (2, 2))
        f2 = self.client.fail(T, b2["key"], 2, {"psp": "declined"}, retriable=False)
        self.assertEqual(f2["status"], "failed")
        b3 = self.client.begin(T, r, PIX)
        self.assertEqual((b3["decision"], b3["status"]), ("replay", "failed"))
        self.assertEqual(b3["error"], {"psp": "declined"})

    def test_renew_extends_the_lease(self):
        r = ref()
        b = self.client.begin(T, r, PIX, pix(r), lease_ms=1000)
        n = self.client.renew(T, b["key"], b["lease_token"], lease_ms=600000)
        self.assertGreater(n["lease_until_ms"], b["lease_until_ms"] + 500000)

    def test_status_and_lookup(self):
        r = ref()
        self.assertEqual(self.client.lookup(T, r, PIX), {"found": False})
        self.client.freeze(T, r, PIX, pix(r))
        lk = self.client.lookup(T, r, PIX)
        self.assertTrue(lk["found"])
        self.assertIsNone(lk["action"])
        with self.assertRaises(ic.NotFound):
            self.client.status(T, lk["key"])
        b = self.client.begin(T, r, PIX)
        st = self.client.status(T, b["key"])["action"]
        self.assertEqual(st["status"], "started")
        self.assertEqual(st["intent_ref"], r)
        self.assertEqual(self.client.lookup(T, r, PIX)["action"]["lease_token"], 1)
        # Scoped by tenant: the same key is unknown elsewhere.
        with self.assertRaises(ic.NotFound):
            self.client.status("globex", b["key"])

    def test_amend_needs_force_after_completion_and_gives_a_new_key(self):
        r = ref()
        b = self.client.begin(T, r, PIX, pix(r, valor="180.00"))
        self.client.complete(T, b["key"], 1, {"charged": "180.00"})
        with self.assertRaises(ic.InvalidState):
            self.client.amend(T, r, PIX, pix(r, valor="1800.00"))
        a = self.client.amend(T, r, PIX, pix(r, valor="1800.00"), force=True)
        self.assertEqual(a["previous_key"], b["key"])
        self.assertNotEqual(a["key"], b["key"])
        self.assertEqual(a["payload"]["valor"], "180000")
        self.assertEqual(self.client.begin(T, r, PIX)["decision"], "execute")
        self.assertEqual(self.client.status(T, b["key"])["action"]["status"], "completed")

    def test_amend_before_any_action_needs_no_force(self):
        r = ref()
        f = self.client.freeze(T, r, PIX, pix(r, valor="180.00"))
        a = self.client.amend(T, r, PIX, pix(r, valor="1800.00"))
        self.assertEqual(a["previous_key"], f["key"])

    def test_uncertain_lists_expired_started_actions(self):
        tenant = "uncertain-" + ref()
        r = ref()
        b = self.client.begin(tenant, r, PIX, pix(r), lease_ms=1000)
        self.assertEqual(self.client.uncertain(tenant), [])
        _sleep_past(b["lease_until_ms"])
        listed = self.client.uncertain(tenant, limit=10)
        self.assertEqual([a["key"] for a in listed], [b["key"]])
        self.assertEqual(listed[0]["intent_ref"], r)
        self.assertEqual(listed[0]["tenant_id"], tenant)

    def test_stats_count_decisions(self):
        before = self.client.stats()
        r = ref()
        b = self.client.begin(T, r, PIX, pix(r))
        self.client.begin(T, r, PIX)
        self.client.complete(T, b["key"], 1, "ok")
        self.client.begin(T, r, PIX)
        after = self.client.stats()
        for name, delta in (("execute", 1), ("in_flight", 1), ("replay", 1)):
            self.assertEqual(after["decisions"].get(name, 0) - before["decisions"].get(name, 0),
                             delta, name)
        self.assertGreaterEqual(after["intents_created"], before["intents_created"] + 1)
        self.assertIn("uptime_ms", after)

    def test_decimal_money_is_sent_as_exact_text(self):
        from decimal import Decimal
        r = ref()
        d = self.client.derive(T, PIX, pix(r, valor=Decimal("180.00")))
        self.assertEqual(d["payload"]["valor"], "18000")


class TypedErrorsTest(AgentTestCase):
    def assertCode(self, exc_type, fn, *args, field=None, **kwargs):
        with self.assertRaises(exc_type) as cm:
            fn(*args, **kwargs)
        e = cm.exception
        self.assertIsInstance(e, ic.IntentdError)
        self.assertEqual(e.code, exc_type.code)
        self.assertTrue(e.message)
        if field is not None:
            self.assertEqual(e.field, field)
        return e

    def test_argument_errors(self):
        r = ref()
        self.assertCode(ic.MissingField, self.client.begin, T, r, PIX)  # no intent yet
        self.assertCode(ic.UnknownActionType, self.client.begin, T, r, "pix.estorno", pix(r))
        self.assertCode(ic.InvalidField, self.client.begin, T, r, PIX, pix(r), lease_ms=5,
                        field="lease_ms")
        self.assertCode(ic.InvalidField, self.client.derive, T, PIX,
                        pix(r, chave="111.222.333-44"), field="chave_pix_destino")
        self.assertCode(ic.InvalidField, self.client.derive, T, PIX, pix(r, valor="1,00"),
                        field="valor")
        self.assertCode(ic.UnknownOp, self.client.request, "charge_twice")

    def test_state_errors(self):
        r = ref()
        self.client.freeze(T, r, PIX, pix(r))
        self.assertCode(ic.PayloadMismatch, self.client.begin, T, r, PIX,
                        pix(r, valor="999.00"), on_divergence="reject")
        b = self.client.begin(T, r, PIX, pix(r), lease_ms=1000)
        _sleep_past(b["lease_until_ms"])
        rec = self.client.begin(T, r, PIX)
        self.assertEqual(rec["decision"], "recover")
        self.assertEqual(rec["previous_lease_token"], 1)
        self.assertCode(ic.LeaseLost, self.client.complete, T, b["key"], 1, "late")
        self.client.complete(T, b["key"], rec["lease_token"], "done")
        self.assertCode(ic.InvalidState, self.client.renew, T, b["key"], rec["lease_token"])
        self.assertCode(ic.NotFound, self.client.status, T, "0" * 64)

    def test_frame_too_large_locally_and_from_the_agent(self):
        r = ref()
        big = {"blob": "x" * 70000}
        self.assertCode(ic.FrameTooLarge, self.client.derive, T, PIX, dict(pix(r), **big))
        unchecked = ic.Client(self.agent.socket, max_frame_bytes=None, reconnect_timeout=0)
        self.addCleanup(unchecked.close)
        try:
            unchecked.derive(T, PIX, dict(pix(r), **big))
            self.fail("the agent accepted a 70 kB line")
        except ic.FrameTooLarge as e:
            self.assertEqual(e.code, "frame_too_large")
        except ic.Unavailable:
            pass  # the agent may close before reading the whole line
        self.assertEqual(unchecked.ping()["protocol"], 1)  # reconnects after the close

    def test_bad_request_on_a_raw_socket(self):
        reply = json.loads(raw_exchange(self.agent.socket, b"{not json\n"))
        self.assertEqual(reply["error"]["code"], "bad_request")
        err = ic.error_from_response(reply)
        self.assertIsInstance(err, ic.BadRequest)

    def test_every_protocol_code_has_its_class(self):
        # The codes the agent itself counts in stats: every one it can send.
        with ic.Client(self.agent.socket) as c:
            codes = sorted(c.stats()["errors"])
        self.assertIn("policy_refused", codes)
        self.assertEqual(sorted(ic.ERRORS_BY_CODE), codes)
        for code in codes:
            e = ic.error_from_response({"ok": False, "error": {
                "code": code, "message": "m", "field": "f"}})
            self.assertIs(type(e), ic.ERRORS_BY_CODE[code])
            self.assertEqual((e.code, e.message, e.field), (code, "m", "f"))
        e = ic.error_from_response({"ok": False, "error": {"code": "brand_new", "message": "m"}})
        self.assertIs(type(e), ic.IntentdError)
        self.assertEqual(e.code, "brand_new")
        self.assertIsNone(e.field)


class SeenOpsTest(AgentTestCase):
    """seen, done and forget against the real agent (no access rules: forget
    is allowed)."""

    def mid(self) -> str:
        return "wamid." + ref("HBgM")

    def test_plain_seen_then_duplicates(self):
        m = self.mid()
        first = self.client.seen(T, "whatsapp", m, meta={"from": "5511987654321"})
        self.assertEqual((first["first"], first["state"], first["count"]), (True, "seen", 1))
        self.assertIsInstance(first["first_seen_at_ms"], int)
        self.assertGreaterEqual(first["expires_at_ms"],
                                first["first_seen_at_ms"] + 7 * 24 * 3600 * 1000)
        self.assertNotIn("lease_token", first)
        again = self.client.seen(T, "whatsapp", m, meta={"from": "someone else"})
        self.assertEqual((again["first"], again["state"], again["count"]), (False, "seen", 2))
        self.assertEqual(again["meta"], {"from": "5511987654321"})  # the first one's
        self.assertEqual(again["first_seen_at_ms"], first["first_seen_at_ms"])
        self.assertTrue(self.client.seen("globex", "whatsapp", m)["first"])  # per tenant
        self.assertTrue(self.client.seen(T, "instagram", m)["first"])  # per channel

    def test_batch_in_request_order_with_a_repeat(self):
        a, b = self.mid(), self.mid()
        self.client.seen(T, "whatsapp", b)
        results = self.client.seen_batch(T, "whatsapp", [a, {"message_id": b, "meta": 2}, a],
                                         meta={"d": 1})
        self.assertEqual([(r["message_id"], r["first"], r["count"]) for r in results],
                         [(a, True, 1), (b, False, 2), (a, False, 2)])
        self.assertEqual(results[0]["meta"], {"d": 1})
        self.assertNotIn("meta", results[1])  # b's first sighting stored none

    def test_claim_done_and_duplicates(self):
        m = self.mid()
        claim = self.client.seen(T, "whatsapp", m, lease_ms=60000)
        self.assertEqual((claim["first"], claim["state"], claim["lease_token"]),
                         (True, "processing", 1))
        self.assertGreater(claim["lease_until_ms"], claim["first_seen_at_ms"] + 50000)
        busy = self.client.seen(T, "whatsapp", m, lease_ms=60000)
        self.assertEqual((busy["first"], busy["state"]), (False, "processing"))
        self.assertGreater(busy["retry_after_ms"], 50000)
        plain = self.client.seen(T, "whatsapp", m)
        self.assertEqual((plain["first"], plain["state"], plain["count"]),
                         (False, "processing", 3))
        self.assertEqual(self.client.done(T, "whatsapp", m, 1), {"state": "done"})
        self.assertEqual(self.client.done(T, "whatsapp", m, 1), {"state": "done"})  # again
        after = self.client.seen(T, "whatsapp", m, lease_ms=60000)
        self.assertEqual((after["first"], after["state"], after["count"]), (False, "done", 4))
        self.assertNotIn("retry_after_ms", after)

    def test_an_expired_claim_is_taken_over(self):
        m, n = self.mid(), self.mid()
        claims = self.client.seen_batch(T, "whatsapp", [m, n], lease_ms=1000)
        _sleep_past(claims[0]["lease_until_ms"])
        again = self.client.seen(T, "whatsapp", m, lease_ms=1000)
        self.assertEqual((again["first"], again["lease_token"]), (True, 2))
        with self.assertRaises(ic.LeaseLost) as cm:
            self.client.done(T, "whatsapp", m, 1)
        self.assertEqual(cm.exception.field, "lease_token")
        self.assertEqual(self.client.done(T, "whatsapp", m, 2), {"state": "done"})
        # Expired, but nobody took it over: still the current claim.
        self.assertEqual(self.client.done(T, "whatsapp", n, 1), {"state": "done"})

    def test_done_errors(self):
        m = self.mid()
        with self.assertRaises(ic.NotFound) as cm:
            self.client.done(T, "whatsapp", m, 1)
        self.assertEqual(cm.exception.field, "message_id")
        self.client.seen(T, "whatsapp", m)
        with self.assertRaises(ic.InvalidState) as cm:
            self.client.done(T, "whatsapp", m, 1)
        self.assertEqual(cm.exception.field, "lease_token")
        c = self.mid()
        self.client.seen(T, "whatsapp", c, lease_ms=60000)
        with self.assertRaises(ic.InvalidState):
            self.client.done(T, "whatsapp", c, 2)  # never granted

    def test_forget(self):
        m = self.mid()
        self.client.seen(T, "whatsapp", m, lease_ms=60000)
        self.assertEqual(self.client.forget(T, "whatsapp", m), {"forgotten": True})
        self.assertEqual(self.client.forget(T, "whatsapp", m), {"forgotten": False})
        with self.assertRaises(ic.NotFound):
            self.client.done(T, "whatsapp", m, 1)
        again = self.client.seen(T, "whatsapp", m)
        self.assertEqual((again["first"], again["count"]), (True, 1))

    def test_argument_errors(self):
        with self.assertRaises(ic.MissingField) as cm:
            self.client.seen(T, "whatsapp", None)
        self.assertEqual(cm.exception.field, "message_id")
        with self.assertRaises(ic.InvalidField) as cm:
            self.client.request("seen", tenant_id=T, channel="whatsapp", message_id="a",
                                messages=["b"])
        self.assertEqual(cm.exception.field, "message_id")
        with self.assertRaises(ic.InvalidField) as cm:
            self.client.seen_batch(T, "whatsapp", [])
        with self.assertRaises(ic.InvalidField) as cm:
            self.client.seen(T, "whatsapp", self.mid(), lease_ms=5)
        self.assertEqual(cm.exception.field, "lease_ms")
        with self.assertRaises(ic.InvalidField) as cm:
            self.client.seen(T, " ", self.mid())
        self.assertEqual(cm.exception.field, "channel")

    def test_stats_count_sightings(self):
        before = self.client.stats()["seen"]
        m = self.mid()
        self.client.seen_batch(T, "whatsapp", [m, m], lease_ms=1000)
        after = self.client.stats()["seen"]
        self.assertEqual(after["first"] - before["first"], 1)
        self.assertEqual(after["duplicates"] - before["duplicates"], 1)
        self.assertIn("reclaimed", after)

    def test_first_sightings_end_to_end(self):
        from intentd_client.webhook import first_sightings
        a, b = self.mid(), self.mid()
        body = {"object": "whatsapp_business_account", "entry": [{"id": "1", "changes": [
            {"field": "messages", "value": {"messaging_product": "whatsapp", "messages": [
                {"from": "5511987654321", "id": i, "type": "text", "text": {"body": "oi"}}
                for i in (a, b)]}}]}]}
        self.assertEqual([e.id for e in first_sightings(self.client, T, body)], [a, b])
        self.assertEqual(first_sightings(self.client, T, body), [])
        c = self.mid()
        body["entry"][0]["changes"][0]["value"]["messages"].append(
            {"from": "5511987654321", "id": c, "type": "text", "text": {"body": "oi"}})
        claimed = first_sightings(self.client, T, body, lease_ms=60000)
        self.assertEqual([(e.id, e.lease_token) for e in claimed], [(c, 1)])
        held = first_sightings(self.client, T, body, lease_ms=60000)
        self.assertEqual(([e.id for e in held], [e.id for e in held.in_progress]), ([], [c]))
        self.assertEqual(self.client.done(T, "whatsapp", c, claimed[0].lease_token)["state"],
                         "done")

    def test_a_released_claim_is_taken_at_once_by_the_next_delivery(self):
        m = self.mid()
        claim = self.client.seen(T, "whatsapp", m, lease_ms=600000)
        released = self.client.release(T, "whatsapp", m, claim["lease_token"])
        self.assertLess(released["lease_until_ms"], claim["lease_until_ms"])
        self.client.release(T, "whatsapp", m, claim["lease_token"])  # again: no change
        again = self.client.seen(T, "whatsapp", m, lease_ms=600000)
        self.assertEqual((again["first"], again["lease_token"]), (True, 2))
        with self.assertRaises(ic.LeaseLost):
            self.client.done(T, "whatsapp", m, 1)
        with self.assertRaises(ic.LeaseLost):
            self.client.release(T, "whatsapp", m, 1)
        self.client.done(T, "whatsapp", m, 2)
        with self.assertRaises(ic.InvalidState):
            self.client.release(T, "whatsapp", m, 2)  # done: nothing to give back

    def test_processing_is_done_on_success_and_released_on_failure(self):
        from intentd_client.webhook import first_sightings, processing
        ok, bad = self.mid(), self.mid()
        body = {"entry": [{"changes": [{"field": "messages", "value": {"messages": [
            {"from": "5511987654321", "id": i, "type": "text"} for i in (ok, bad)]}}]}]}
        handled = []
        for event in first_sightings(self.client, T, body, lease_ms=600000):
            try:
                with processing(self.client, T, event):
                    if event.id == bad:
                        raise ConnectionError("PSP 503")
                    handled.append(event.id)
            except ConnectionError:
                pass
        self.assertEqual(handled, [ok])
        # The failed one is given back: the redelivery processes it at once
        # (no waiting out the 10-minute lease); the handled one is dropped.
        again = first_sightings(self.client, T, body, lease_ms=600000)
        self.assertEqual([(e.id, e.lease_token) for e in again], [(bad, 2)])
        self.assertEqual(again.in_progress, [])
        with processing(self.client, T, again[0]):
            pass
        self.assertEqual(self.client.seen(T, "whatsapp", bad)["state"], "done")
        with self.assertRaises(ValueError):  # a plain sighting has no claim to end
            with processing(self.client, T, first_sightings(self.client, T, {
                    "entry": [{"changes": [{"value": {"messages": [{"id": self.mid()}]}}]}]})[0]):
                pass

    def test_bad_ids_are_reported_and_the_rest_of_the_body_is_processed(self):
        from intentd_client.webhook import first_sightings
        good = self.mid()
        body = {"entry": [{"changes": [{"field": "messages", "value": {"messages": [
            {"id": "   "}, {"id": "w" * 300}, {"id": 42}, {"id": good}]}}]}]}
        found = first_sightings(self.client, T, body)
        self.assertEqual([e.id for e in found], [good])
        self.assertEqual([e.id for e in found.rejected], ["   ", "w" * 300, "42"])
        for e in found.rejected:
            self.assertTrue(e.reason)
        self.assertIn("256", found.rejected[1].reason)


class ReconnectTest(unittest.TestCase):
    def test_reconnects_after_the_agent_restarts(self):
        agent = AgentProcess().start()
        self.addCleanup(agent.cleanup)
        client = ic.Client(agent.socket, reconnect_timeout=15.0, backoff_max=0.2)
        self.addCleanup(client.close)
        r = ref()
        b = client.begin(T, r, PIX, pix(r))
        self.assertEqual(agent.stop(), 0)
        restarter = threading.Timer(0.5, agent.start)
        restarter.start()
        self.addCleanup(restarter.join)
        # Sent while the agent is down: retried with backoff until it is back.
        c = client.complete(T, b["key"], b["lease_token"], {"after": "restart"})
        self.assertEqual(c["status"], "completed")
        self.assertGreaterEqual(client.reconnects, 1)
        self.assertEqual(client.begin(T, r, PIX)["response"], {"after": "restart"})

    def test_idle_connection_closed_by_a_restart_is_not_used(self):
        agent = AgentProcess().start()
        self.addCleanup(agent.cleanup)
        client = ic.Client(agent.socket, reconnect_timeout=0)  # no retries at all
        self.addCleanup(client.close)
        r = ref()
        client.freeze(T, r, PIX, pix(r))
        agent.stop()
        agent.start()
        # amend is never resent blindly; it must go out on a fresh connection.
        self.assertEqual(client.amend(T, r, PIX, pix(r, valor="1800.00"))["payload"]["valor"],
                         "180000")
        self.assertEqual(client.reconnects, 1)

    def test_unavailable_when_nobody_listens(self):
        with tempfile.TemporaryDirectory() as d:
            client = ic.Client(os.path.join(d, "none.sock"), reconnect_timeout=0.3)
            t0 = time.monotonic()
            with self.assertRaises(ic.Unavailable) as cm:
                client.ping()
            self.assertIsInstance(cm.exception, ConnectionError)
            self.assertGreater(time.monotonic() - t0, 0.05)  # it did back off and retry

    def test_socket_path_from_environment(self):
        old = os.environ.get("INTENTD_SOCKET")
        os.environ["INTENTD_SOCKET"] = "/tmp/from-env.sock"
        try:
            self.assertEqual(ic.Client().socket_path, "/tmp/from-env.sock")
            self.assertEqual(ic.Client("/x.sock").socket_path, "/x.sock")
            del os.environ["INTENTD_SOCKET"]
            self.assertEqual(ic.AsyncClient().socket_path, "/run/intentd/intentd.sock")
        finally:
            if old is not None:
                os.environ["INTENTD_SOCKET"] = old


class FakeAgentTest(unittest.TestCase):
    """Transport behaviour no real agent shows on demand: silence, garbage,
    overload. A tiny scripted server answers each request line."""

    def serve(self, answer):
        d = tempfile.mkdtemp(prefix="intentd-fake-")
        path = os.path.join(d, "fake.sock")
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        srv.bind(path)
        srv.listen(8)
        self.requests = []

        def loop():
            while True:
                try:
                    conn, _ = srv.accept()
                except OSError:
                    return
                with conn:
                    f = conn.makefile("rb")
                    for line in f:
                        req = json.loads(line)
                        self.requests.append(req)
                        out = answer(req, len(self.requests))
                        if out is None:
                            continue  # stay silent
                        if out == b"":
                            conn.shutdown(socket.SHUT_RDWR)  # hang up, no answer
                            break
                        conn.sendall(out)
        threading.Thread(target=loop, daemon=True).start()
        self.addCleanup(shutil.rmtree, d, True)
        self.addCleanup(srv.close)
        return path

    def test_timeout_when_the_agent_is_silent(self):
        path = self.serve(lambda req, n: None)
        client = ic.Client(path, timeout=0.2)
        self.addCleanup(client.close)
        with self.assertRaises(ic.Timeout) as cm:
            client.ping()
        self.assertIsInstance(cm.exception, TimeoutError)

    def test_wrong_id_is_a_protocol_error(self):
        path = self.serve(lambda req, n: b'{"id":999,"ok":true}\n')
        client = ic.Client(path)
        self.addCleanup(client.close)
        with self.assertRaises(ic.ProtocolError):
            client.ping()

    def test_garbage_is_a_protocol_error(self):
        path = self.serve(lambda req, n: b"hello\n")
        client = ic.Client(path)
        self.addCleanup(client.close)
        with self.assertRaises(ic.ProtocolError):
            client.ping()

    def test_overloaded_is_retried_with_backoff(self):
        def answer(req, n):
            if n < 3:
                return json.dumps({"id": req["id"], "ok": False, "error": {
                    "code": "overloaded", "message": "busy"}}).encode() + b"\n"
            return json.dumps({"id": req["id"], "ok": True, "protocol": 1}).encode() + b"\n"
        path = self.serve(answer)
        client = ic.Client(path, backoff_initial=0.01)
        self.addCleanup(client.close)
        self.assertEqual(client.ping(), {"protocol": 1})
        self.assertEqual(len(self.requests), 3)
        self.assertEqual(len({r["id"] for r in self.requests}), 1)  # same request, resent

    def test_amend_is_not_resent_after_a_broken_connection(self):
        path = self.serve(lambda req, n: b"")
        client = ic.Client(path, timeout=1.0, reconnect_timeout=2.0)
        self.addCleanup(client.close)
        r = ref()
        with self.assertRaises(ic.Unavailable) as cm:
            client.amend(T, r, PIX, pix(r))
        self.assertIn("outcome", str(cm.exception))
        self.assertEqual(len(self.requests), 1)

    def test_ids_grow_per_request(self):
        path = self.serve(lambda req, n: json.dumps(
            {"id": req["id"], "ok": True}).encode() + b"\n")
        client = ic.Client(path)
        self.addCleanup(client.close)
        client.ping()
        client.stats()
        self.assertEqual([r["id"] for r in self.requests], [1, 2])
        self.assertEqual([r["op"] for r in self.requests], ["ping", "stats"])


def _sleep_past(lease_until_ms: int) -> None:
    """Lease expiry needs real time here: the agent is a separate process
    with its own clock (lease_ms is at least 1000)."""
    time.sleep(max(0.0, lease_until_ms / 1000.0 - time.time()) + 0.15)


if __name__ == "__main__":
    unittest.main()
