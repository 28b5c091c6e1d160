"""The README's snippets, run: each one that calls a PSP is executed
against a real agent and a fake PSP, and the amount it charged is checked.
The repository's README.md is held to the same rules (its driver: quick).

Every ```python block of README.md must compile. A block that calls the
PSP (`psp.`) must be marked with `<!-- snippet-test: NAME -->` on the line
before it, NAME one of DRIVERS below, which runs it: so a snippet that
hands the provider the normalized payload ("valor": "18000", cents) charges
R$ 18.000,00 here and fails.
"""

from __future__ import annotations

import ast
import json
import os
import re
import sys
import unittest
from decimal import Decimal
from types import SimpleNamespace
from typing import Any, Dict, List, Tuple

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))

from agent_process import AgentProcess  # noqa: E402
from intentd_client import Client  # noqa: E402
from fixtures import cpf  # noqa: E402

README = os.path.join(os.path.dirname(__file__), "..", "README.md")
# The repository's README shows a shorter integration, marked "quick".
ROOT_README = os.path.join(os.path.dirname(__file__), "..", "..", "..", "README.md")
MARK = re.compile(r"^<!-- snippet-test: ([a-z_]+) -->$")
PIX_KEY = cpf("111222333")
INVOICE_AMOUNT = Decimal("180.00")


def snippets(path: str) -> List[Tuple[str, str, int]]:
    """(mark or "", code, line) of every ```python block."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    out = []
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```python":
            mark = MARK.match(lines[i - 1].strip()) if i > 0 else None
            j = i + 1
            while lines[j].strip() != "```":
                j += 1
            out.append((mark.group(1) if mark else "", "\n".join(lines[i + 1:j]), i + 1))
            i = j
        i += 1
    return out


class Charge(dict):
    """A PSP's answer: a JSON object that also reads as attributes."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


class FakePSP:
    """Records every charge; a txid charged before is answered, not charged
    again (as the BCB API Pix does for PUT /cob/{txid})."""

    def __init__(self) -> None:
        self.charges: List[Dict[str, Any]] = []
        self.by_txid: Dict[str, Charge] = {}

    def create_charge(self, **kw: Any) -> Charge:
        if kw["txid"] in self.by_txid:
            return self.by_txid[kw["txid"]]
        self.charges.append(kw)
        charge = Charge(id=f"cob-{len(self.charges)}", status="ATIVA", status_code=201,
                        txid=kw["txid"], amount=str(kw["amount"]))
        self.by_txid[kw["txid"]] = charge
        return charge

    def find_charge(self, txid: str) -> Any:
        return self.by_txid.get(txid)


class FakeModel:
    """extract_charge: what a model would extract, with the amount spelled
    as models do (an integer: R$ 180,00); a later call says something
    else, as a second model run may."""

    def __init__(self) -> None:
        self.calls = 0

    def extract_charge(self, text: str, invoice: Any) -> Dict[str, Any]:
        self.calls += 1
        return {"cliente_id": invoice.customer, "valor": 180 + (self.calls - 1) * 7,
                "chave_pix_destino": PIX_KEY, "descricao": f"{text} (run {self.calls})"}


class ReadmeSnippetsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.agent = AgentProcess().start()
        cls.old_socket = os.environ.get("INTENTD_SOCKET")
        os.environ["INTENTD_SOCKET"] = cls.agent.socket  # what Client() reads
        cls.blocks = snippets(README)

    @classmethod
    def tearDownClass(cls) -> None:
        if cls.old_socket is None:
            os.environ.pop("INTENTD_SOCKET", None)
        else:
            os.environ["INTENTD_SOCKET"] = cls.old_socket
        cls.agent.cleanup()

    def block(self, name: str) -> str:
        found = [code for mark, code, _ in self.blocks if mark == name]
        self.assertEqual(len(found), 1, f"README.md has {len(found)} snippets marked {name}")
        return found[0]

    def test_every_snippet_compiles_and_every_psp_call_is_run_here(self):
        self.assertGreaterEqual(len(self.blocks), 5)
        for mark, code, line in self.blocks:
            ast.parse(code, f"README.md:{line}")
            if "psp." in code:
                self.assertIn(mark, DRIVERS,
                              f"README.md:{line} calls the PSP but is not marked "
                              f"<!-- snippet-test: NAME --> with a driver in {__file__}")

    def test_flow(self):
        psp, model = FakePSP(), FakeModel()
        sent: List[Tuple[str, Any]] = []
        invoice = SimpleNamespace(id="FAT-README-FLOW", customer="01J9ZQ3K8V7M2N4P6R8T0W2Y4A")
        ns: Dict[str, Any] = {
            "db": SimpleNamespace(open_invoice=lambda tenant, phone: invoice),
            "model": model, "psp": psp,
            "whatsapp": SimpleNamespace(send_pix_code=lambda to, r: sent.append((to, r))),
        }
        exec(compile(self.block("flow"), "README.md#flow", "exec"), ns)

        def body(wamid: str) -> bytes:
            return json.dumps({"entry": [{"changes": [{"field": "messages", "value": {
                "messages": [{"from": "5511987654321", "id": wamid, "type": "text",
                              "text": {"body": "quero pagar a fatura"}}]}}]}]}).encode()
        ns["worker"](body("wamid.README-1"))
        ns["worker"](body("wamid.README-1"))  # Meta's redelivery: dropped
        # The customer asks again in a new message: the same open invoice,
        # the frozen charge is read back: no model call, no second charge.
        ns["worker"](body("wamid.README-2"))
        self.assertEqual(len(psp.charges), 1, psp.charges)
        charged = psp.charges[0]
        self.assertEqual(charged["amount"], INVOICE_AMOUNT)
        self.assertIsInstance(charged["amount"], Decimal)
        self.assertEqual(charged["pix_key"], PIX_KEY)
        self.assertEqual(charged["description"], "quero pagar a fatura (run 1)")
        self.assertEqual(model.calls, 1)
        self.assertEqual([r["id"] for _, r in sent], ["cob-1", "cob-1"])

    def test_run_action(self):
        psp = FakePSP()
        client = Client(self.agent.socket)
        self.addCleanup(client.close)
        ns: Dict[str, Any] = {
            "client": client,
            "psp": psp,
            "payload": {"cliente_id": "01J9ZQ3K8V7M2N4P6R8T0W2Y4A", "valor": "180.0",
                        "chave_pix_destino": PIX_KEY},
        }
        code = self.block("run_action")
        exec(compile(code, "README.md#run_action", "exec"), ns)
        exec(compile(code, "README.md#run_action", "exec"), ns)  # a redelivery
        self.assertEqual([c["amount"] for c in psp.charges], [INVOICE_AMOUNT])
        self.assertTrue(ns["act"].replayed)

    def test_root_readme_snippets_compile_and_every_psp_call_is_run_here(self):
        blocks = snippets(ROOT_README)
        self.assertGreaterEqual(len(blocks), 1)
        for mark, code, line in blocks:
            ast.parse(code, f"README.md:{line}")
            if "psp." in code:
                self.assertIn(mark, ROOT_DRIVERS,
                              f"the repository's README.md:{line} calls the PSP but is not "
                              f"marked <!-- snippet-test: NAME --> with a driver in {__file__}")

    def test_root_readme_quick(self):
        found = [code for mark, code, _ in snippets(ROOT_README) if mark == "quick"]
        self.assertEqual(len(found), 1, "the repository's README.md: one python snippet "
                                        "marked quick")
        psp, model = FakePSP(), FakeModel()
        invoice = SimpleNamespace(id="FAT-README-QUICK", customer="01J9ZQ3K8V7M2N4P6R8T0W2Y4A")
        ns: Dict[str, Any] = {
            "db": SimpleNamespace(open_invoice=lambda tenant, phone: invoice),
            "model": model, "psp": psp,
        }
        exec(compile(found[0], "README.md#quick", "exec"), ns)
        message = {"from": "5511987654321", "text": "quero pagar a fatura"}
        first = ns["charge_invoice"]("acme", message)
        again = ns["charge_invoice"]("acme", message)  # a redelivery
        self.assertEqual(len(psp.charges), 1, psp.charges)
        self.assertEqual(psp.charges[0]["amount"], INVOICE_AMOUNT)
        self.assertIsInstance(psp.charges[0]["amount"], Decimal)
        self.assertEqual(psp.charges[0]["pix_key"], PIX_KEY)
        self.assertEqual(model.calls, 1)
        self.assertEqual(first["id"], "cob-1")
        self.assertEqual(again["id"], "cob-1")

    def test_tool(self):
        psp = FakePSP()
        invoice = SimpleNamespace(id="FAT-README-TOOL", customer="01J9ZQ3K8V7M2N4P6R8T0W2Y4A")
        args = {"invoice_id": invoice.id, "valor": "180.0", "chave_pix_destino": PIX_KEY}
        turns = [[SimpleNamespace(id="call_1", function=SimpleNamespace(
            name="create_pix_charge", arguments=json.dumps(args)))],
                 [SimpleNamespace(id="call_2", function=SimpleNamespace(
                     name="create_pix_charge", arguments=json.dumps(args)))], []]

        def complete(messages: Any, tools: Any) -> Any:
            return SimpleNamespace(message=SimpleNamespace(tool_calls=turns.pop(0)))
        ns: Dict[str, Any] = {
            "db": SimpleNamespace(invoice=lambda tenant, ref: invoice if ref == invoice.id
                                  else None),
            "psp": psp, "model": SimpleNamespace(complete=complete), "TOOL_SCHEMAS": [],
            "messages": [], "session": SimpleNamespace(tenant_id="acme"),
        }
        exec(compile(self.block("tool"), "README.md#tool", "exec"), ns)
        self.assertEqual([c["amount"] for c in psp.charges], [INVOICE_AMOUNT])
        tool_texts = [m["content"] for m in ns["messages"] if isinstance(m, dict)]
        self.assertEqual(len(tool_texts), 2)
        self.assertIn("ALREADY DONE", tool_texts[1])


DRIVERS = {"flow", "run_action", "tool"}
ROOT_DRIVERS = {"quick"}

if __name__ == "__main__":
    unittest.main()
