"""For the guarded-tool tests: a naive fake PSP, invoices, a Pix charge tool."""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any, Dict, List, Optional

from intentd_client.tools import Anchor, AnchorRefused

from fixtures import cpf, ref

T = "acme"
PIX = "pix.cobranca"


class FakePsp:
    """A Pix PSP that makes a new charge on every create, even under a txid
    it has seen: a charge made twice shows as two (so the tests can fail).
    find_charge(txid) is API Pix's GET /cob/{txid}."""

    def __init__(self, delay: float = 0.0):
        self.delay = delay
        self.charges: List[Dict[str, Any]] = []
        self.requests = 0
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def create_charge(self, txid: str, valor: str, chave: str, invoice_id: str) -> Dict[str, Any]:
        with self._lock:
            self.requests += 1
            charge = {"charge_id": f"ch_{next(self._ids)}", "txid": txid, "status": "ATIVA",
                      "valor": valor, "chave": chave, "invoice_id": invoice_id}
            self.charges.append(charge)
        time.sleep(self.delay)
        return dict(charge)

    def find_charge(self, txid: str) -> Optional[Dict[str, Any]]:
        with self._lock:
            found = [c for c in self.charges if c["txid"] == txid]
        return dict(found[0]) if found else None

    def charges_of(self, invoice_id: str) -> List[Dict[str, Any]]:
        with self._lock:
            return [c for c in self.charges if c["invoice_id"] == invoice_id]


class Invoices:
    """The server's own invoices: tenant → invoice id → customer id."""

    def __init__(self) -> None:
        self.by_tenant: Dict[str, Dict[str, str]] = {T: {}}

    def new(self) -> str:
        invoice_id = ref("INV")
        self.by_tenant[T][invoice_id] = f"cliente-{invoice_id}"
        return invoice_id

    def anchor(self, args: Dict[str, Any], context: Dict[str, Any]) -> Anchor:
        """The anchor rule: the tenant from the context, the invoice from
        this table; the model's arguments only name the invoice."""
        tenant = (context or {}).get("tenant_id")
        customer = self.by_tenant.get(tenant, {}).get(args.get("invoice_id"))
        if customer is None:
            raise AnchorRefused(f"there is no invoice {args.get('invoice_id')!r} for this account")
        return Anchor(tenant, args["invoice_id"], payload={
            "cliente_id": customer, "valor": args["valor"],
            "chave_pix_destino": args["chave_pix_destino"]})


def charge_args(invoice_id: str, **overrides: Any) -> Dict[str, Any]:
    """The model's arguments for a charge of invoice_id."""
    return dict({"invoice_id": invoice_id, "valor": "180.00",
                 "chave_pix_destino": cpf("111222333")}, **overrides)
