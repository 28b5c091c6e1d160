"""The guarded-tool decorator (sync) against a real agent: every outcome,
one charge per invoice, and a raw function-calling loop whose model repeats
a tool call under a new tool_call_id."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))

import intentd_client as ic  # noqa: E402
from intentd_client.tools import (Anchor, AnchorRefused, frozen_input,  # noqa: E402
                                  guarded_tool)
from agent_process import AgentProcess  # noqa: E402
from tool_fixtures import PIX, T, FakePsp, Invoices, charge_args  # noqa: E402

CTX = {"tenant_id": T}


class GuardedToolTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.agent = AgentProcess().start()

    @classmethod
    def tearDownClass(cls) -> None:
        cls.agent.cleanup()

    def setUp(self) -> None:
        self.client = ic.Client(self.agent.socket, reconnect_timeout=2.0)
        self.addCleanup(self.client.close)
        self.psp = FakePsp()
        self.invoices = Invoices()

    def tool(self, psp=None, **options):
        """create_pix_charge, guarded; options override the decorator's."""
        psp = psp or self.psp
        kw = dict(anchor=self.invoices.anchor, status=lambda call: psp.find_charge(call.txid),
                  lease_ms=1000, in_flight_wait=5.0)
        kw.update(options)

        @guarded_tool(self.client, PIX, **kw)
        def create_pix_charge(input, call):
            """Creates a Pix charge for an invoice."""
            return psp.create_charge(call.txid, str(call.amount("valor")),
                                     input["chave_pix_destino"], call.intent_ref)
        return create_pix_charge

    def test_executes_once_then_replays_naming_the_fields(self):
        inv = self.invoices.new()
        tool = self.tool()
        self.assertEqual(tool.__name__, "create_pix_charge")
        first = tool(charge_args(inv), CTX)
        self.assertEqual((first.outcome, first.is_error, first.replay), ("executed", False, False))
        self.assertTrue(first.text.startswith("DONE: pix.cobranca for " + inv))
        self.assertEqual(first.result["txid"], first.txid)
        again = tool(charge_args(inv, valor="1800.00"), CTX)
        self.assertEqual((again.outcome, again.replay, again.is_error), ("replayed", True, False))
        self.assertEqual(again.result, first.result)
        self.assertEqual(again.diverged_fields, ["valor"])
        self.assertTrue(again.text.startswith("ALREADY DONE (replay)"))
        self.assertIn("in: valor; the first ones stand", again.text)
        self.assertIn("Do not call this tool again", again.text)
        self.assertEqual(again.to_dict()["result"], first.result)
        charges = self.psp.charges_of(inv)
        self.assertEqual(len(charges), 1)
        self.assertEqual(charges[0]["valor"], "180.00")  # as written, not cents

    def test_refused_anchor_freezes_and_charges_nothing(self):
        out = self.tool()(charge_args("FAT-0000-NOPE"), CTX)
        self.assertEqual((out.outcome, out.is_error), ("refused", True))
        self.assertEqual(out.error["code"], "anchor_refused")
        self.assertEqual(out.text, "REFUSED: there is no invoice 'FAT-0000-NOPE' for this "
                                   "account. Nothing was done.")
        self.assertFalse(self.client.lookup(T, "FAT-0000-NOPE", PIX)["found"])
        # Another tenant naming this tenant's invoice: refused as well.
        inv = self.invoices.new()
        self.assertEqual(self.tool()(charge_args(inv), {"tenant_id": "globex"}).outcome, "refused")
        self.assertFalse(self.client.lookup(T, inv, PIX)["found"])
        self.assertEqual(self.psp.requests, 0)

    def test_broken_anchor_is_a_tool_error(self):
        out = self.tool(anchor=lambda args, ctx: Anchor(T, ""))(charge_args("x"), CTX)
        self.assertEqual((out.outcome, out.error["code"]), ("error", "anchor_error"))

    def test_duplicates_at_once_charge_once(self):
        inv = self.invoices.new()
        slow = FakePsp(delay=0.4)
        tool = self.tool(psp=slow)
        outs = []
        threads = [threading.Thread(target=lambda: outs.append(tool(charge_args(inv), CTX)))
                   for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(sorted(o.outcome for o in outs), ["executed", "replayed"])
        self.assertEqual(outs[0].result, outs[1].result)
        self.assertEqual(len(slow.charges_of(inv)), 1)

    def test_in_progress_after_the_bounded_wait(self):
        inv = self.invoices.new()
        self.client.begin(T, inv, PIX, {"cliente_id": "c", "valor": "1.00",
                                        "chave_pix_destino": "a@b.com"}, lease_ms=60000)
        started = time.monotonic()
        out = self.tool(in_flight_wait=0.3)(charge_args(inv), CTX)
        self.assertLess(time.monotonic() - started, 3.0)
        self.assertEqual((out.outcome, out.is_error), ("in_progress", False))
        self.assertEqual(len(out.txid), 35)
        self.assertTrue(out.text.startswith("IN PROGRESS: "))
        self.assertIn("Do not retry", out.text)
        self.assertEqual(self.psp.requests, 0)

    def test_recover_asks_the_provider_first(self):
        inv = self.invoices.new()
        dead = self.client.begin(T, inv, PIX, self.invoices.anchor(charge_args(inv), CTX).payload,
                                 lease_ms=1000)
        self.psp.create_charge(dead["txid"], "180.00", "k", inv)  # charged, then the worker died
        out = self.tool()(charge_args(inv), CTX)
        self.assertEqual((out.outcome, out.replay), ("recovered", True))
        self.assertTrue(out.text.startswith("ALREADY DONE: "))
        self.assertEqual(len(self.psp.charges_of(inv)), 1)
        self.assertEqual(self.tool()(charge_args(inv), CTX).outcome, "replayed")

    def test_recover_without_a_charge_calls_once_under_the_same_txid(self):
        inv = self.invoices.new()
        dead = self.client.begin(T, inv, PIX, self.invoices.anchor(charge_args(inv), CTX).payload,
                                 lease_ms=1000)
        out = self.tool()(charge_args(inv), CTX)
        self.assertEqual((out.outcome, out.recovering), ("executed", True))
        self.assertEqual([c["txid"] for c in self.psp.charges_of(inv)], [dead["txid"]])

    def test_retriable_releases_terminal_is_replayed(self):
        inv = self.invoices.new()

        def refusing(exc):
            @guarded_tool(self.client, PIX, anchor=self.invoices.anchor, lease_ms=1000)
            def tool(input, call):
                raise exc
            return tool

        out = refusing(ic.Retriable("503 before acting", error={"http": 503}))(charge_args(inv), CTX)
        self.assertEqual((out.outcome, out.error), ("released", {"http": 503}))
        self.assertTrue(out.text.startswith("NOT DONE: "))
        self.assertEqual(self.client.lookup(T, inv, PIX)["action"]["status"], "released")
        out = refusing(ic.Terminal("declined", error={"reason": "blocked"}))(charge_args(inv), CTX)
        self.assertEqual((out.outcome, out.replay), ("failed", False))
        again = self.tool()(charge_args(inv), CTX)
        self.assertEqual((again.outcome, again.replay), ("failed", True))
        self.assertTrue(again.text.startswith("FAILED EARLIER (replay)"))
        self.assertEqual(self.psp.requests, 0)

    def test_unknown_ending_then_the_next_call_recovers(self):
        inv = self.invoices.new()

        def lost_answer(input, call):
            self.psp.create_charge(call.txid, str(call.amount("valor")), "k", inv)
            raise ConnectionResetError("reset while reading the PSP answer")
        out = guarded_tool(self.client, PIX, anchor=self.invoices.anchor,
                           lease_ms=1000)(lost_answer)(charge_args(inv), CTX)
        self.assertEqual((out.outcome, out.is_error), ("unknown", True))
        self.assertIn("resumes this same action", out.text)
        self.assertEqual(self.tool()(charge_args(inv), CTX).outcome, "recovered")
        self.assertEqual(len(self.psp.charges_of(inv)), 1)

    def test_a_result_intentd_cannot_store_is_done_and_said_so(self):
        inv = self.invoices.new()

        def big_answer(input, call):
            self.psp.create_charge(call.txid, str(call.amount("valor")), "k", inv)
            return {"charge_id": "ch_big", "raw": "x" * 40000}  # over complete's 32 KiB
        out = guarded_tool(self.client, PIX, anchor=self.invoices.anchor,
                           lease_ms=1000)(big_answer)(charge_args(inv), CTX)
        self.assertEqual((out.outcome, out.is_error, out.recorded), ("executed", False, False))
        self.assertEqual(out.error["code"], "invalid_field")
        self.assertIn("could not record it: invalid_field; calling again resumes", out.text)
        self.assertEqual(self.tool()(charge_args(inv), CTX).outcome, "recovered")
        self.assertEqual(len(self.psp.charges_of(inv)), 1)

    def test_intentd_errors_are_outcomes_with_code_and_field(self):
        inv = self.invoices.new()
        out = self.tool()(charge_args(inv, chave_pix_destino="111.222.333-44"), CTX)
        self.assertEqual((out.outcome, out.error["code"], out.error["field"]),
                         ("error", "invalid_field", "chave_pix_destino"))
        self.assertTrue(out.text.startswith("ERROR (invalid_field on chave_pix_destino): "))
        self.assertFalse(self.client.lookup(T, inv, PIX)["found"])
        gone = ic.Client(os.path.join(self.agent.dir, "nobody.sock"), reconnect_timeout=0)
        self.addCleanup(gone.close)
        out = guarded_tool(gone, PIX, anchor=self.invoices.anchor)(
            lambda input, call: self.fail("called"))(charge_args(inv), CTX)
        self.assertEqual(out.error["code"], "unavailable")
        self.assertEqual(self.psp.requests, 0)

    def test_diverged_arguments_without_frozen_input_are_not_sent(self):
        inv = self.invoices.new()

        def unavailable(input, call):
            raise ic.Retriable("503 before acting")
        guarded_tool(self.client, PIX, anchor=self.invoices.anchor)(unavailable)(
            charge_args(inv), CTX)
        out = self.tool()(charge_args(inv, valor="999.00"), CTX)
        if out.outcome == "executed":  # an agent that answers with `input`
            self.assertEqual(self.psp.charges_of(inv)[0]["valor"], "180.00")
        else:
            self.assertEqual((out.outcome, out.error["code"]), ("error", "frozen_input_unavailable"))
            self.assertEqual(self.psp.requests, 0)
            self.assertEqual(self.client.lookup(T, inv, PIX)["action"]["status"], "released")

    def test_frozen_input_prefers_input_and_never_payload(self):
        mine = {"valor": "1.00"}
        self.assertEqual(frozen_input({"input": {"valor": "2.00"}, "payload": {"valor": "200"}},
                                      mine), ({"valor": "2.00"}, "intentd"))
        self.assertEqual(frozen_input({"payload": {"valor": "100"}, "diverged": False}, mine),
                         (mine, "request"))
        self.assertIsNone(frozen_input({"payload": {"valor": "200"}, "diverged": True}, mine))

    def test_the_provider_gets_input_from_an_agent_that_returns_it(self):
        frozen = {"valor": "180.00", "chave_pix_destino": "a@b.com", "nota": "first"}

        class Stub:  # an agent with the `input` member; what Action reads
            def begin(self, **kw):
                return {"decision": "execute", "key": "k" * 64, "txid": "k" * 35,
                        "payload": {"valor": "18000"}, "input": frozen, "diverged": True,
                        "diverged_fields": ["valor"], "attempt": 2, "lease_token": 2}

            def complete(self, *a):
                return {"status": "completed"}

            def renew(self, *a, **kw):
                return {}

            def action(self, *a, **kw):
                from intentd_client.action import Action
                return Action(self, *a, **kw)

        seen = []
        out = guarded_tool(Stub(), PIX, anchor=lambda args, ctx: Anchor(T, "FAT-1"))(
            lambda input, call: seen.append(input) or "ok")({"valor": "999.00"}, CTX)
        self.assertEqual(out.outcome, "executed")
        self.assertEqual(seen, [frozen])
        self.assertIn("in: valor; the first ones were used", out.text)


class FunctionCallingLoopTest(unittest.TestCase):
    """A raw loop: the "model" asks for create_pix_charge, then asks again on
    a later turn under a new tool_call_id, as agent loops do after a retry."""

    @classmethod
    def setUpClass(cls) -> None:
        cls.agent = AgentProcess().start()

    @classmethod
    def tearDownClass(cls) -> None:
        cls.agent.cleanup()

    def test_a_repeated_tool_call_is_answered_with_a_replay(self):
        client = ic.Client(self.agent.socket, reconnect_timeout=2.0)
        self.addCleanup(client.close)
        psp, invoices = FakePsp(), Invoices()
        inv = invoices.new()

        @guarded_tool(client, PIX, anchor=invoices.anchor,
                      status=lambda call: psp.find_charge(call.txid))
        def create_pix_charge(input, call):
            return psp.create_charge(call.txid, str(call.amount("valor")),
                                     input["chave_pix_destino"], call.intent_ref)

        tools = {"create_pix_charge": create_pix_charge}
        session = {"tenant_id": T}  # the authenticated session, never the model's output
        scripted_turns = [
            [{"id": "call_a1", "function": {"name": "create_pix_charge",
                                            "arguments": json.dumps(charge_args(inv))}}],
            [{"id": "call_b7", "function": {"name": "create_pix_charge",
                                            "arguments": json.dumps(charge_args(inv))}}],
        ]
        messages = [{"role": "user", "content": f"cobrar a fatura {inv}"}]
        for tool_calls in scripted_turns:  # each turn: what the model answered
            messages.append({"role": "assistant", "tool_calls": tool_calls})
            for call in tool_calls:
                outcome = tools[call["function"]["name"]](
                    json.loads(call["function"]["arguments"]), session)
                messages.append({"role": "tool", "tool_call_id": call["id"],
                                 "content": outcome.text})
        tool_messages = [m["content"] for m in messages if m["role"] == "tool"]
        self.assertTrue(tool_messages[0].startswith("DONE: "))
        self.assertTrue(tool_messages[1].startswith("ALREADY DONE (replay)"))
        self.assertEqual(len(psp.charges_of(inv)), 1)


if __name__ == "__main__":
    unittest.main()
