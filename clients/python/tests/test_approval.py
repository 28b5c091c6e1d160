"""Approval above the policy's threshold, through a real agent: the action
helper raises PendingApproval without running your code until an admin
approves; a denial replays failed; the client's admin calls."""

from __future__ import annotations

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))

import intentd_client as ic  # noqa: E402
from agent_process import AgentProcess  # noqa: E402
from fixtures import pix, ref  # noqa: E402
from intentd_client.tools import guarded_tool  # noqa: E402
from tool_fixtures import Invoices, charge_args  # noqa: E402

T = "acme"
PIX = "pix.cobranca"
POLICY = '{"policy": {"pix.cobranca": {"money": {"valor": {"approval_above": "1000.00"}}}}}\n'


class ApprovalTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.agent = AgentProcess()
        with open(cls.agent.config, "w") as f:
            f.write(POLICY)
        cls.agent.start()

    @classmethod
    def tearDownClass(cls) -> None:
        cls.agent.cleanup()

    def setUp(self) -> None:
        self.client = ic.Client(self.agent.socket, timeout=5.0)
        self.addCleanup(self.client.close)

    def test_a_pending_intent_never_runs_your_code_until_approved(self):
        r = ref()
        calls = []
        for _ in range(2):  # the first delivery and a redelivery
            with self.assertRaises(ic.PendingApproval) as caught:
                with self.client.action(T, r, PIX, pix(r, valor="1800.00")) as act:
                    calls.append(act.decision)
            self.assertIn("approval_above", caught.exception.reason)
            self.assertEqual(caught.exception.approval["state"], "pending")
        self.assertEqual(calls, [])
        waiting = [i for i in self.client.pending(T) if i["intent_ref"] == r]
        self.assertEqual(len(waiting), 1)
        self.assertEqual(waiting[0]["money"], {"valor": "1800.00"})
        approved = self.client.approve(T, r, PIX, note="called the customer")
        self.assertEqual(approved["approval"]["state"], "approved")
        self.assertEqual(approved["approval"]["note"], "called the customer")
        with self.client.action(T, r, PIX, pix(r, valor="1800.00")) as act:
            self.assertTrue(act.should_call)
            self.assertEqual(str(act.amount("valor")), "1800.00")
            act.result = {"txid": act.txid}
        self.assertEqual(self.client.lookup(T, r, PIX)["action"]["status"], "completed")

    def test_a_denied_intent_replays_failed(self):
        r = ref()
        with self.assertRaises(ic.PendingApproval):
            with self.client.action(T, r, PIX, pix(r, valor="5000.00")):
                self.fail("must not run")
        denied = self.client.deny(T, r, PIX, note="not our customer")
        self.assertEqual(denied["action"]["status"], "failed")
        with self.client.action(T, r, PIX, pix(r, valor="5000.00")) as act:
            self.assertFalse(act.should_call)
            self.assertTrue(act.failed)
            self.assertEqual(act.error["code"], "denied")
        with self.assertRaises(ic.InvalidState):
            self.client.approve(T, r, PIX)

    def test_below_the_threshold_nothing_waits(self):
        r = ref()
        with self.client.action(T, r, PIX, pix(r, valor="1000.00")) as act:
            self.assertTrue(act.should_call)
            self.assertNotIn("approval", act.begin)
            act.result = {"ok": True}

    def test_a_guarded_tool_tells_the_model_to_wait_for_the_review(self):
        invoices = Invoices()
        inv = invoices.new()
        calls = []

        @guarded_tool(self.client, PIX, anchor=invoices.anchor)
        def create_pix_charge(input, call):
            """Creates a Pix charge for an invoice."""
            calls.append(call.txid)
            return {"txid": call.txid}

        out = create_pix_charge(charge_args(inv, valor="1800.00"), {"tenant_id": T})
        self.assertEqual(out.outcome, "pending_approval")
        self.assertFalse(out.is_error)
        self.assertTrue(out.text.startswith("WAITING FOR APPROVAL: pix.cobranca for " + inv))
        self.assertIn("Do not retry", out.text)
        self.assertEqual(calls, [])
        self.client.approve(T, inv, PIX)
        out = create_pix_charge(charge_args(inv, valor="1800.00"), {"tenant_id": T})
        self.assertEqual(out.outcome, "executed")
        self.assertEqual(len(calls), 1)


if __name__ == "__main__":
    unittest.main()
