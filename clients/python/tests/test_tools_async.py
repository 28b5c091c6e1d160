"""The guarded-tool decorator on async def tools with an AsyncClient."""

from __future__ import annotations

import asyncio
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))

import intentd_client as ic  # noqa: E402
from intentd_client.tools import AnchorRefused, guarded_tool  # noqa: E402
from agent_process import AgentProcess  # noqa: E402
from tool_fixtures import PIX, T, FakePsp, Invoices, charge_args  # noqa: E402

CTX = {"tenant_id": T}


class AsyncGuardedToolTest(unittest.IsolatedAsyncioTestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.agent = AgentProcess().start()

    @classmethod
    def tearDownClass(cls) -> None:
        cls.agent.cleanup()

    async def asyncSetUp(self) -> None:
        self.client = ic.AsyncClient(self.agent.socket, reconnect_timeout=2.0)
        self.psp = FakePsp()
        self.invoices = Invoices()

    async def asyncTearDown(self) -> None:
        await self.client.close()

    def tool(self, delay: float = 0.0, **options):
        psp = self.psp

        async def anchor(args, context):  # an async anchor: a database lookup
            await asyncio.sleep(0)
            return self.invoices.anchor(args, context)

        async def status(call):
            await asyncio.sleep(0)
            return psp.find_charge(call.txid)

        kw = dict(anchor=anchor, status=status, lease_ms=1000, in_flight_wait=5.0)
        kw.update(options)

        @guarded_tool(self.client, PIX, **kw)
        async def create_pix_charge(input, call):
            charge = psp.create_charge(call.txid, str(call.amount("valor")),
                                       input["chave_pix_destino"], call.intent_ref)
            await asyncio.sleep(delay)
            return charge
        return create_pix_charge

    async def test_duplicates_at_once_then_a_changed_retry(self):
        inv = self.invoices.new()
        tool = self.tool(delay=0.3)
        outs = await asyncio.gather(tool(charge_args(inv), CTX), tool(charge_args(inv), CTX))
        self.assertEqual(sorted(o.outcome for o in outs), ["executed", "replayed"])
        again = await tool(charge_args(inv, valor="18.00"), CTX)
        self.assertEqual((again.outcome, again.diverged_fields), ("replayed", ["valor"]))
        self.assertTrue(again.text.startswith("ALREADY DONE (replay)"))
        self.assertEqual(len(self.psp.charges_of(inv)), 1)

    async def test_refused_and_in_progress_charge_nothing(self):
        out = await self.tool()(charge_args("FAT-0000-NOPE"), CTX)
        self.assertEqual(out.outcome, "refused")
        self.assertFalse((await self.client.lookup(T, "FAT-0000-NOPE", PIX))["found"])
        inv = self.invoices.new()
        await self.client.begin(T, inv, PIX, {"cliente_id": "c", "valor": "1.00",
                                              "chave_pix_destino": "a@b.com"}, lease_ms=60000)
        out = await self.tool(in_flight_wait=0.3)(charge_args(inv), CTX)
        self.assertEqual((out.outcome, out.is_error), ("in_progress", False))
        self.assertEqual(self.psp.requests, 0)

    async def test_recover_finds_the_charge_of_a_dead_attempt(self):
        inv = self.invoices.new()
        dead = await self.client.begin(T, inv, PIX,
                                       self.invoices.anchor(charge_args(inv), CTX).payload,
                                       lease_ms=1000)
        self.psp.create_charge(dead["txid"], "180.00", "k", inv)
        out = await self.tool()(charge_args(inv), CTX)
        self.assertEqual((out.outcome, out.replay), ("recovered", True))
        self.assertEqual(len(self.psp.charges_of(inv)), 1)

    async def test_provider_endings(self):
        inv = self.invoices.new()

        @guarded_tool(self.client, PIX, anchor=self.invoices.anchor, lease_ms=1000)
        async def unavailable(input, call):
            raise ic.Retriable("503 before acting")

        @guarded_tool(self.client, PIX, anchor=self.invoices.anchor, lease_ms=1000)
        async def lost(input, call):
            self.psp.create_charge(call.txid, "180.00", "k", inv)
            raise asyncio.TimeoutError()

        self.assertEqual((await unavailable(charge_args(inv), CTX)).outcome, "released")
        self.assertEqual((await lost(charge_args(inv), CTX)).outcome, "unknown")
        self.assertEqual((await self.tool()(charge_args(inv), CTX)).outcome, "recovered")
        self.assertEqual(len(self.psp.charges_of(inv)), 1)

    async def test_intentd_error_and_a_mismatched_client(self):
        inv = self.invoices.new()
        out = await self.tool()(charge_args(inv, valor="cento e oitenta"), CTX)
        self.assertEqual((out.outcome, out.error["code"], out.error["field"]),
                         ("error", "invalid_field", "valor"))
        with self.assertRaises(TypeError):
            guarded_tool(self.client, PIX, anchor=self.invoices.anchor)(lambda input, call: 1)

    async def test_anchor_refused_from_an_async_anchor(self):
        async def anchor(args, context):
            raise AnchorRefused("invoice of another tenant")

        @guarded_tool(self.client, PIX, anchor=anchor)
        async def never(input, call):
            raise AssertionError("called")

        out = await never({"invoice_id": "x"}, CTX)
        self.assertEqual(out.text, "REFUSED: invoice of another tenant. Nothing was done.")


if __name__ == "__main__":
    unittest.main()
