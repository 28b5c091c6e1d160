"""The asyncio client against a real agent: ops, errors, the action helper."""

from __future__ import annotations

import asyncio
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))

import intentd_client as ic  # noqa: E402
from agent_process import AgentProcess  # noqa: E402
from fixtures import cpf, pix, ref  # noqa: E402

T = "acme"
PIX = "pix.cobranca"


class AsyncTest(unittest.IsolatedAsyncioTestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.agent = AgentProcess().start()

    @classmethod
    def tearDownClass(cls) -> None:
        cls.agent.cleanup()

    async def asyncSetUp(self) -> None:
        self.client = ic.AsyncClient(self.agent.socket, reconnect_timeout=2.0)
        self.executed = {}

    async def asyncTearDown(self) -> None:
        await self.client.close()

    async def charge(self, act):
        await asyncio.sleep(0)
        first = act.key not in self.executed
        self.executed.setdefault(act.key, {"charge_id": f"ch_{len(self.executed) + 1}"})
        return dict(self.executed[act.key], replayed=not first)

    async def test_every_op(self):
        c = self.client
        self.assertEqual((await c.ping())["protocol"], 1)
        r = ref()
        d1 = await c.derive(T, PIX, pix(r, chave=cpf("123456789")))
        d2 = await c.derive(T, PIX, pix(r, chave=cpf("123456789", punctuated=False)))
        self.assertEqual(d1["key"], d2["key"])
        f = await c.freeze(T, r, PIX, pix(r))
        self.assertTrue(f["created"])
        lk = await c.lookup(T, r, PIX)
        self.assertTrue(lk["found"])
        b = await c.begin(T, r, PIX, lease_ms=1000)
        self.assertEqual(b["decision"], "execute")
        rn = await c.renew(T, b["key"], 1, lease_ms=60000)
        self.assertGreater(rn["lease_until_ms"], b["lease_until_ms"])
        self.assertEqual((await c.status(T, b["key"]))["action"]["status"], "started")
        await c.fail(T, b["key"], 1, "not sent", retriable=True)
        b2 = await c.begin(T, r, PIX)
        self.assertEqual(b2["attempt"], 2)
        await c.complete(T, b2["key"], b2["lease_token"], {"ok": 1})
        a = await c.amend(T, r, PIX, pix(r, valor="1800.00"), force=True)
        self.assertEqual(a["previous_key"], b["key"])
        self.assertIsInstance(await c.uncertain(T), list)
        self.assertIn("execute", (await c.stats())["decisions"])

    async def test_typed_errors(self):
        r = ref()
        with self.assertRaises(ic.MissingField) as cm:
            await self.client.begin(T, r, PIX)
        self.assertEqual(cm.exception.code, "missing_field")
        with self.assertRaises(ic.InvalidField) as cm:
            await self.client.derive(T, PIX, pix(r, valor="-1"))
        self.assertEqual(cm.exception.field, "valor")
        with self.assertRaises(ic.UnknownOp):
            await self.client.request("nope")
        with self.assertRaises(ic.FrameTooLarge):
            await self.client.derive(T, PIX, dict(pix(r), blob="x" * 70000))

    async def test_action_execute_then_replay(self):
        r = ref()
        first = await self.client.run_action(T, r, PIX, pix(r), self.charge)
        self.assertEqual((first.decision, first.status), ("execute", "completed"))
        async with self.client.action(T, r, PIX, pix(r)) as act:
            self.assertFalse(act.should_call)
        self.assertTrue(act.replayed)
        self.assertEqual(act.response, first.response)
        self.assertEqual(len(self.executed), 1)

    async def test_action_with_an_async_extraction_calls_the_model_once(self):
        r = ref()
        calls = []

        async def extract():
            await asyncio.sleep(0)
            calls.append(1)
            return dict(pix(r, valor=180), descricao=f"call {len(calls)}")
        first = await self.client.run_action(T, r, PIX, extract, self.charge)
        self.assertEqual((first.decision, first.extracted), ("execute", True))
        second = await self.client.run_action(T, r, PIX, extract, self.charge)
        self.assertEqual((second.decision, second.extracted), ("replay", False))
        self.assertEqual(len(calls), 1)
        self.assertEqual(second.input["descricao"], "call 1")
        self.assertEqual(str(second.amount("valor")), "180.00")
        self.assertEqual(second.amount_cents("valor"), 18000)
        # A plain function works with the async client too.
        r2 = ref()
        plain = await self.client.run_action(T, r2, PIX, lambda: pix(r2), self.charge)
        self.assertTrue(plain.extracted)

    async def test_release_and_processing_async(self):
        from intentd_client.webhook import first_sightings_async, processing_async
        m = f"wamid.async-{ref()}"
        body = {"entry": [{"changes": [{"value": {"messages": [{"id": m}]}}]}]}
        [event] = await first_sightings_async(self.client, T, body, lease_ms=600000)
        with self.assertRaises(RuntimeError):
            async with processing_async(self.client, T, event):
                raise RuntimeError("model down")
        [again] = await first_sightings_async(self.client, T, body, lease_ms=600000)
        self.assertEqual(again.lease_token, 2)
        async with processing_async(self.client, T, again):
            pass
        self.assertEqual((await self.client.seen(T, "whatsapp", m))["state"], "done")
        with self.assertRaises(ic.InvalidState):
            await self.client.release(T, "whatsapp", m, 2)

    async def test_action_in_flight_wait_and_renewal(self):
        r = ref()
        other = ic.AsyncClient(self.agent.socket)
        self.addAsyncCleanup(other.close)
        started = asyncio.Event()

        async def slow(act):
            started.set()
            await asyncio.sleep(2.2)  # two 1 s leases: renewal keeps it ours
            return "slow-result"
        holder = asyncio.ensure_future(
            other.run_action(T, r, PIX, pix(r), slow, lease_ms=1000))
        await started.wait()
        waiter = await self.client.run_action(T, r, PIX, pix(r), self.charge,
                                              poll_max=0.2, wait=10)
        held = await holder
        self.assertEqual(held.lease_token, 1)
        self.assertEqual(waiter.decision, "replay")
        self.assertEqual(waiter.response, "slow-result")
        self.assertGreaterEqual(waiter.waited_polls, 3)
        self.assertEqual(self.executed, {})

    async def test_action_recover_and_outcomes(self):
        r = ref()
        dead = await self.client.begin(T, r, PIX, pix(r), lease_ms=1000)
        await asyncio.sleep(max(0.0, dead["lease_until_ms"] / 1000 - time.time()) + 0.1)
        act = await self.client.run_action(T, r, PIX, pix(r), self.charge)
        self.assertTrue(act.recovering)
        self.assertEqual(act.previous_lease_token, 1)

        r2 = ref()

        async def refuse(act):
            raise ic.Retriable("not sent")
        with self.assertRaises(ic.Retriable):
            await self.client.run_action(T, r2, PIX, pix(r2), refuse)
        self.assertEqual((await self.client.lookup(T, r2, PIX))["action"]["status"], "released")

        async def decline(act):
            raise ic.Terminal("declined", error={"reason": "blocked"})
        done = await self.client.run_action(T, r2, PIX, pix(r2), decline)
        self.assertTrue(done.failed)
        again = await self.client.run_action(T, r2, PIX, pix(r2), self.charge)
        self.assertTrue(again.replayed and again.failed)
        self.assertEqual(again.error, {"reason": "blocked"})

        r3 = ref()

        async def crash(act):
            raise KeyError("bug")
        with self.assertRaises(KeyError):
            await self.client.run_action(T, r3, PIX, pix(r3), crash, lease_ms=600000)
        st = (await self.client.lookup(T, r3, PIX))["action"]
        self.assertEqual(st["status"], "started")
        self.assertLess(st["lease_until_ms"] - time.time() * 1000, 1500)

    async def test_still_in_flight(self):
        r = ref()
        await self.client.begin(T, r, PIX, pix(r), lease_ms=60000)
        with self.assertRaises(ic.StillInFlight):
            await self.client.run_action(T, r, PIX, pix(r), self.charge, wait=0.2,
                                         poll_max=0.05)


class AsyncReconnectTest(unittest.IsolatedAsyncioTestCase):
    async def test_reconnects_after_the_agent_restarts(self):
        loop = asyncio.get_running_loop()
        agent = await loop.run_in_executor(None, lambda: AgentProcess().start())
        self.addCleanup(agent.cleanup)
        client = ic.AsyncClient(agent.socket, reconnect_timeout=15.0, backoff_max=0.2)
        self.addAsyncCleanup(client.close)
        await client.ping()
        self.assertEqual(await loop.run_in_executor(None, agent.stop), 0)
        restart = loop.run_in_executor(None, lambda: (time.sleep(0.5), agent.start()))
        self.assertEqual((await client.ping())["protocol"], 1)
        await restart
        self.assertGreaterEqual(client.reconnects, 1)

    async def test_unavailable(self):
        client = ic.AsyncClient("/nonexistent/dir/x.sock", reconnect_timeout=0.2)
        self.addAsyncCleanup(client.close)
        with self.assertRaises(ic.Unavailable):
            await client.ping()


if __name__ == "__main__":
    unittest.main()
