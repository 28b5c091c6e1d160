"""A bot: a queue consumer that turns customers' WhatsApp messages into Pix
charges.

    bot.py --mode naive|intentd --world URL [--socket S]
        reads deliveries, one JSON object a line on stdin:
        {"message": {"id": "wamid...", "from": PHONE, "text": ...},
         "delivery": N}, and answers "ack" or "nack"
    bot.py ... --message JSON --delivery N    handles one delivery and exits

Both bots first find what the customer is paying: the open invoice of the
sender's number, in the billing system. That invoice number is the intent's
anchor (intent_ref): it existed before the customer wrote, and every
redelivery finds the same one. The message id (wamid), a number the model
reads out of the text, a fresh uuid or the clock would not do: each attempt
would freeze an intent of its own (docs/integrating.md, "Choosing the anchor").

naive    calls the model, draws uuid4() as the Idempotency-Key of THIS attempt
         and charges what this attempt's model read. The key changes on every
         redelivery: every attempt pays.
intentd  client.run_action with the extraction as a function: the model is
         called only when the intent is not frozen yet. begin -> charge the
         frozen amount (act.amount("valor"), whole units) and the frozen Pix
         key (act.input) with the key derived from the frozen payload ->
         complete. A redelivery replays, waits out the live attempt, or
         recovers, without calling the model again.

A delivery ends in ack (done) or nack (redeliver later; exit 75 in the
one-shot form). SIGKILL, sent by the fake world's chaos plan, is the crash.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import sys
import urllib.parse
import uuid
from typing import Optional

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "clients", "python"))

import intentd_client  # noqa: E402

TENANT = "acme"
ACTION = "pix.cobranca"
EXIT_NACK = 75


class World:
    def __init__(self, url: str, mode: str, intent_ref: str, delivery: int):
        self.host, self.port = url.split("//", 1)[1].rsplit(":", 1)
        self.headers = {"Content-Type": "application/json", "X-Mode": mode,
                        "X-Bot-Pid": str(os.getpid()), "X-Intent-Ref": intent_ref,
                        "X-Delivery": str(delivery)}

    def post(self, path: str, body: dict, **headers: str) -> dict:
        conn = http.client.HTTPConnection(self.host, int(self.port), timeout=30)
        try:
            conn.request("POST", path, body=json.dumps(body).encode(),
                         headers=dict(self.headers, **headers))
            resp = conn.getresponse()
            data = resp.read()
            if resp.status != 200:
                raise RuntimeError(f"{path}: HTTP {resp.status}: {data[:200]!r}")
            return json.loads(data)
        finally:
            conn.close()

    def model(self, text: str, message_id: str) -> dict:
        """The model call: 8,000 input + 600 output tokens, every time."""
        return self.post("/model", {"text": text},
                         **{"X-Message-Id": message_id})["extraction"]

    def charge(self, key: str, intent_ref: str, valor: str, chave: str, txid: str = "") -> dict:
        return self.post("/charge", {"intent_ref": intent_ref, "valor": valor,
                                     "chave_pix_destino": chave, "txid": txid},
                         **{"Idempotency-Key": key})


def open_invoice(url: str, phone: str) -> Optional[dict]:
    """The billing system's open invoice for this WhatsApp number:
    {"invoice": "FAT-2026-000123", "cliente_id": ...}, None when there is none."""
    host, port = url.split("//", 1)[1].rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.request("GET", "/billing/open-invoice?" + urllib.parse.urlencode({"phone": phone}))
        resp = conn.getresponse()
        data = resp.read()
        if resp.status == 404:
            return None
        if resp.status != 200:
            raise RuntimeError(f"billing: HTTP {resp.status}: {data[:200]!r}")
        return json.loads(data)
    finally:
        conn.close()


def naive(world: World, msg: dict, invoice: dict) -> int:
    extraction = world.model(msg["text"], msg["id"])
    key = str(uuid.uuid4())  # drawn inside the attempt: the bug
    world.charge(key, invoice["invoice"], extraction["valor"], extraction["chave_pix_destino"])
    return 0


def with_intentd(world: World, msg: dict, invoice: dict, client: intentd_client.Client,
                 tenant: str = TENANT) -> int:
    ref = invoice["invoice"]  # the anchor: found by the sender's number, not read by the model
    model_called = []

    def extract() -> dict:
        # Called by run_action only when no intent is frozen for ref yet.
        model_called.append(True)
        return {"cliente_id": invoice["cliente_id"], "referencia_intencao": ref,
                **world.model(msg["text"], msg["id"])}

    def charge(act: intentd_client.Action) -> dict:
        # What the first extraction froze, never this attempt's reading:
        # the amount in whole units (Decimal "180.00"; act.payload["valor"]
        # is the key's normalized "18000", cents) and the Pix key as the
        # model wrote it.
        return world.charge(act.key, ref, str(act.amount("valor")),
                            act.input["chave_pix_destino"], act.txid)

    try:
        act = client.run_action(tenant, ref, ACTION, extract, charge,
                                lease_ms=1000, wait=15.0, poll_max=0.2)
    except intentd_client.StillInFlight:
        world.post("/event", {"event": "nack_in_flight", "intent_ref": ref})
        return EXIT_NACK
    finally:
        if not model_called:
            world.post("/event", {"event": "model_skipped", "intent_ref": ref})
    if act.extracted and not act.created:
        # Another worker froze the intent while this one's model call ran
        # (two deliveries of one message at once): a model call no anchor
        # can save.
        world.post("/event", {"event": "model_raced", "intent_ref": ref})
    world.post("/event", {"event": "outcome", "intent_ref": ref, "decision": act.decision,
                          "waited_polls": act.waited_polls, "diverged": act.diverged,
                          "diverged_fields": act.diverged_fields})
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=("naive", "intentd"), required=True)
    ap.add_argument("--world", required=True)
    ap.add_argument("--message", help="handle this one message and exit")
    ap.add_argument("--delivery", type=int, default=1)
    ap.add_argument("--socket")
    ap.add_argument("--label", help="who the world counts this bot as (default: the mode)")
    ap.add_argument("--tenant", default=TENANT, help=f"intentd tenant (default {TENANT})")
    a = ap.parse_args()
    client = intentd_client.Client(a.socket, reconnect_timeout=5.0) if a.mode == "intentd" \
        else None

    def handle(msg: dict, delivery: int) -> int:
        invoice = open_invoice(a.world, msg["from"])
        if invoice is None:
            return 0  # nothing to charge: a real bot would answer the customer
        world = World(a.world, a.label or a.mode, invoice["invoice"], delivery)
        if client is None:
            return naive(world, msg, invoice)
        return with_intentd(world, msg, invoice, client, a.tenant)

    if a.message:
        return handle(json.loads(a.message), a.delivery)
    print("ready", flush=True)
    for line in sys.stdin:
        d = json.loads(line)
        try:
            rc = handle(d["message"], d["delivery"])
        except Exception as e:  # noqa: BLE001 - a consumer reports and nacks
            sys.stderr.write(f"bot: {d['message']['id']}: {e!r}\n")
            rc = EXIT_NACK
        print("ack" if rc == 0 else "nack", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
