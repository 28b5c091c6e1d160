"""The blocking action helper against a real agent: its decisions."""

from __future__ import annotations

import os
import sys
import threading
import time
import unittest
from decimal import Decimal

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))

import intentd_client as ic  # noqa: E402
from agent_process import AgentProcess  # noqa: E402
from fixtures import pix, ref  # noqa: E402

T = "acme"
PIX = "pix.cobranca"


class FakeProvider:
    """Counts real executions per idempotency key and replays the first answer."""

    def __init__(self, delay: float = 0.0):
        self.delay = delay
        self.calls = []
        self.executed = {}
        self.lock = threading.Lock()

    def charge(self, key: str, txid: str, valor: Decimal):
        with self.lock:
            self.calls.append(key)
            first = key not in self.executed
            if first:
                self.executed[key] = {"charge_id": f"ch_{len(self.executed) + 1}",
                                      "txid": txid, "valor": str(valor)}
        time.sleep(self.delay)
        return dict(self.executed[key], replayed=not first)


class ActionTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.agent = AgentProcess().start()

    @classmethod
    def tearDownClass(cls) -> None:
        cls.agent.cleanup()

    def setUp(self) -> None:
        self.client = ic.Client(self.agent.socket, reconnect_timeout=2.0)
        self.addCleanup(self.client.close)
        self.psp = FakeProvider()

    def charge(self, act):
        return self.psp.charge(act.key, act.txid, act.amount("valor"))

    def test_execute_then_replay_without_calling(self):
        r = ref()
        first = self.client.run_action(T, r, PIX, pix(r), self.charge)
        self.assertEqual(first.decision, "execute")
        self.assertEqual(first.status, "completed")
        self.assertFalse(first.replayed)
        self.assertEqual(first.response["charge_id"], "ch_1")
        second = self.client.run_action(T, r, PIX, pix(r, valor="1800.00"), self.charge)
        self.assertTrue(second.replayed)
        self.assertEqual(second.response, first.response)
        self.assertTrue(second.diverged)
        self.assertEqual(second.diverged_fields, ["valor"])
        self.assertEqual(second.payload["valor"], "18000")  # the frozen one
        self.assertEqual(len(self.psp.calls), 1)

    def test_context_manager_form(self):
        r = ref()
        for _ in range(3):
            with self.client.action(T, r, PIX, pix(r)) as act:
                if act.should_call:
                    act.result = self.charge(act)
        self.assertTrue(act.replayed)
        self.assertEqual(act.response["charge_id"], "ch_1")
        self.assertEqual(len(self.psp.calls), 1)

    def test_in_flight_waits_for_the_holder_and_replays(self):
        r = ref()
        self.psp.delay = 0.8
        holder = {}

        def first():
            c = ic.Client(self.agent.socket)
            holder["act"] = c.run_action(T, r, PIX, pix(r), self.charge)
            c.close()
        t = threading.Thread(target=first)
        t.start()
        deadline = time.monotonic() + 5
        while not self.psp.calls and time.monotonic() < deadline:
            time.sleep(0.01)
        second = self.client.run_action(T, r, PIX, pix(r), self.charge,
                                        lease_ms=30000, poll_max=0.1)
        t.join()
        self.assertTrue(second.replayed)
        self.assertGreaterEqual(second.waited_polls, 1)
        self.assertEqual(second.response, holder["act"].response)
        self.assertEqual(len(self.psp.calls), 1)

    def test_gives_up_with_still_in_flight_at_the_deadline(self):
        r = ref()
        self.client.begin(T, r, PIX, pix(r), lease_ms=60000)
        t0 = time.monotonic()
        with self.assertRaises(ic.StillInFlight) as cm:
            self.client.run_action(T, r, PIX, pix(r), self.charge, wait=0.3, poll_max=0.1)
        self.assertLess(time.monotonic() - t0, 2.0)
        self.assertGreater(cm.exception.retry_after_ms, 50000)
        self.assertEqual(cm.exception.code, "in_flight")
        self.assertEqual(self.psp.calls, [])

    def test_recover_after_a_dead_worker_repeats_with_the_same_key(self):
        r = ref()
        dead = self.client.begin(T, r, PIX, pix(r), lease_ms=1000)
        self.psp.charge(dead["key"], dead["txid"], Decimal("180.00"))  # it acted, then died
        act = self.client.run_action(T, r, PIX, pix(r), self.charge, lease_ms=1000, wait=5)
        self.assertEqual(act.decision, "recover")
        self.assertTrue(act.recovering)
        self.assertEqual(act.previous_lease_token, dead["lease_token"])
        self.assertEqual(act.lease_token, dead["lease_token"] + 1)
        self.assertEqual(act.status, "completed")
        self.assertTrue(act.response["replayed"])  # the provider deduplicated
        self.assertEqual(len(self.psp.executed), 1)
        # The dead worker's token is refused now that the action is completed.
        with self.assertRaises(ic.InvalidState):
            self.client.complete(T, dead["key"], dead["lease_token"], "zombie")

    def test_retriable_releases_and_reraises(self):
        r = ref()

        def refused(act):
            raise ic.Retriable("psp 503 before acting", error={"http": 503})
        with self.assertRaises(ic.Retriable):
            self.client.run_action(T, r, PIX, pix(r), refused)
        status = self.client.lookup(T, r, PIX)["action"]
        self.assertEqual(status["status"], "released")
        again = self.client.run_action(T, r, PIX, pix(r), self.charge)
        self.assertEqual((again.decision, again.attempt), ("execute", 2))

    def test_custom_retriable_exception_types(self):
        r = ref()

        def refused(act):
            raise ConnectionRefusedError("psp down")
        with self.assertRaises(ConnectionRefusedError):
            self.client.run_action(T, r, PIX, pix(r), refused,
                                   retriable=(ConnectionRefusedError,))
        self.assertEqual(self.client.lookup(T, r, PIX)["action"]["status"], "released")

    def test_terminal_is_stored_and_replayed(self):
        r = ref()

        def declined(act):
            raise ic.Terminal("declined", error={"reason": "insufficient funds"})
        act = self.client.run_action(T, r, PIX, pix(r), declined)
        self.assertTrue(act.failed)
        self.assertEqual(act.error, {"reason": "insufficient funds"})
        again = self.client.run_action(T, r, PIX, pix(r), self.charge)
        self.assertTrue(again.replayed)
        self.assertTrue(again.failed)
        self.assertEqual(again.error, {"reason": "insufficient funds"})
        self.assertEqual(self.psp.calls, [])

    def test_unknown_exception_leaves_the_outcome_open_and_recoverable_soon(self):
        r = ref()

        def crash(act):
            self.psp.charge(act.key, act.txid, act.amount("valor"))
            raise RuntimeError("socket reset while reading the PSP answer")
        with self.assertRaises(RuntimeError):
            self.client.run_action(T, r, PIX, pix(r), crash, lease_ms=600000)
        st = self.client.lookup(T, r, PIX)["action"]
        self.assertEqual(st["status"], "started")
        # The 10-minute lease was cut to 1 s, so a redelivery recovers now.
        self.assertLess(st["lease_until_ms"] - time.time() * 1000, 1500)
        act = self.client.run_action(T, r, PIX, pix(r), self.charge, poll_max=0.2)
        self.assertEqual(act.decision, "recover")
        self.assertTrue(act.response["replayed"])
        self.assertEqual(len(self.psp.executed), 1)

    def test_lease_is_renewed_while_the_call_runs(self):
        r = ref()
        seen = {}

        def slow(act):
            time.sleep(2.3)  # more than twice the 1 s lease
            other = ic.Client(self.agent.socket)
            seen["decision"] = other.begin(T, r, PIX)["decision"]
            other.close()
            return "ok"
        act = self.client.run_action(T, r, PIX, pix(r), slow, lease_ms=1000)
        self.assertEqual(seen["decision"], "in_flight")
        self.assertEqual(act.status, "completed")
        self.assertFalse(act.lease_lost)
        self.assertEqual(act.lease_token, 1)

    def test_result_not_set_completes_with_null(self):
        r = ref()
        with self.client.action(T, r, PIX, pix(r)) as act:
            pass
        self.assertEqual(act.status, "completed")
        again = self.client.begin(T, r, PIX)
        self.assertIsNone(again["response"])

    def test_reject_divergence(self):
        r = ref()
        self.client.run_action(T, r, PIX, pix(r), self.charge)
        with self.assertRaises(ic.PayloadMismatch):
            self.client.run_action(T, r, PIX, pix(r, valor="1.00"), self.charge,
                                   on_divergence="reject")

    def test_the_provider_gets_the_frozen_amount_in_units_and_the_whole_first_input(self):
        r = ref()
        first = dict(pix(r, valor=180), descricao="Pedido 42")  # 180 is R$ 180,00
        act = self.client.run_action(T, r, PIX, first, self.charge)
        self.assertEqual(self.psp.executed[act.key]["valor"], "180.00")
        self.assertEqual(act.amount("valor"), Decimal("180.00"))
        self.assertEqual(act.amount_cents("valor"), 18000)
        self.assertEqual(act.payload["valor"], "18000")  # the key input, in cents
        self.assertEqual(act.input, first)
        self.assertEqual(act.pix_key_types, {"chave_pix_destino": "cpf"})
        # A recovering attempt with another extraction acts on the first one.
        r2 = ref()
        self.client.begin(T, r2, PIX, dict(pix(r2), descricao="first"), lease_ms=1000)
        later = dict(pix(r2, valor="180.0"), descricao="second")
        got = {}

        def call(act):
            got["descricao"] = act.input["descricao"]
            got["valor"] = act.amount("valor")
            return "ok"
        act = self.client.run_action(T, r2, PIX, later, call, wait=5, poll_max=0.2)
        self.assertEqual(act.decision, "recover")
        self.assertEqual(got, {"descricao": "first", "valor": Decimal("180.00")})
        with self.assertRaises(KeyError) as cm:
            act.amount("cliente_id")
        self.assertIn("valor", str(cm.exception))

    def test_a_payload_function_runs_only_when_the_intent_is_new(self):
        r = ref()
        calls = []

        def extract():
            calls.append(1)
            return pix(r, valor=str(180 + len(calls)))  # every model call differs
        a = self.client.run_action(T, r, PIX, extract, self.charge)
        self.assertEqual((a.decision, a.extracted, len(calls)), ("execute", True, 1))
        self.assertEqual(a.amount("valor"), Decimal("181.00"))
        for _ in range(3):  # redeliveries: the frozen intent is read back, no model call
            b = self.client.run_action(T, r, PIX, extract, self.charge)
            self.assertTrue(b.replayed)
            self.assertFalse(b.extracted)
            self.assertEqual(b.input["valor"], "181")
        self.assertEqual(len(calls), 1)
        self.assertEqual(len(self.psp.calls), 1)
        # An extraction that fails freezes nothing; one that returns no dict
        # is a clear error.
        r2 = ref()

        def broken():
            raise TimeoutError("model timed out")
        with self.assertRaises(TimeoutError):
            self.client.run_action(T, r2, PIX, broken, self.charge)
        self.assertFalse(self.client.lookup(T, r2, PIX)["found"])
        with self.assertRaises(TypeError):
            self.client.run_action(T, r2, PIX, lambda: "not a dict", self.charge)

        async def coroutine():
            return pix(r2)
        with self.assertRaises(TypeError) as cm:
            self.client.run_action(T, r2, PIX, coroutine, self.charge)
        self.assertIn("AsyncClient", str(cm.exception))

    def test_bad_lease_is_refused_before_any_request(self):
        with self.assertRaises(ValueError):
            self.client.action(T, ref(), PIX, {}, lease_ms=10)


if __name__ == "__main__":
    unittest.main()
