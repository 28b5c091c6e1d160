"""A bot: a queue consumer that turns payment messages into Pix charges.

    bot.py --mode naive|intentd --world URL [--socket S]
        reads deliveries, one JSON object a line on stdin:
        {"message": {...}, "delivery": N}, and answers "ack" or "nack"
    bot.py ... --message JSON --delivery N    handles one delivery and exits

naive    calls the model, draws uuid4() as the Idempotency-Key of THIS attempt
         and charges. The key changes on every redelivery: every attempt pays.
intentd  looks the frozen intent up first; only when there is none it calls
         the model. Then the intentd_client action helper: begin → charge
         with the key derived from the frozen payload → complete. A
         redelivery replays, waits out the live attempt, or recovers.

A delivery ends in ack (done) or nack (redeliver later; exit 75 in the
one-shot form). SIGKILL, sent by the fake world's chaos plan, is the crash.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import sys
import uuid

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

    def model(self, text: str) -> dict:
        """The model call: 8,000 input + 600 output tokens, every time."""
        return self.post("/model", {"text": text})["extraction"]

    def charge(self, key: str, intent_ref: str, valor: str, chave: str, txid: str = "") -> dict:
        return self.post("/charge", {"intent_ref": intent_ref, "valor": valor,
                                     "chave_pix_destino": chave, "txid": txid},
                         **{"Idempotency-Key": key})


def naive(world: World, msg: dict) -> int:
    extraction = world.model(msg["text"])
    key = str(uuid.uuid4())  # drawn inside the attempt: the bug
    world.charge(key, msg["intent_ref"], extraction["valor"], extraction["chave_pix_destino"])
    return 0


def with_intentd(world: World, msg: dict, client: intentd_client.Client,
                 tenant: str = TENANT) -> int:
    ref = msg["intent_ref"]
    payload = None
    if client.lookup(tenant, ref, ACTION)["found"]:
        # Frozen before: the model's answer of this attempt is not needed.
        world.post("/event", {"event": "model_skipped", "intent_ref": ref})
    else:
        extraction = world.model(msg["text"])
        payload = {"cliente_id": msg["cliente_id"], "referencia_intencao": ref, **extraction}

    def charge(act: intentd_client.Action) -> dict:
        p = act.payload  # the frozen, normalized payload: valor in cents
        valor = f"{int(p['valor']) // 100}.{int(p['valor']) % 100:02d}"
        return world.charge(act.key, ref, valor, p["chave_pix_destino"], act.txid)

    try:
        act = client.run_action(tenant, ref, ACTION, payload, charge,
                                lease_ms=1000, wait=15.0, poll_max=0.2)
    except intentd_client.StillInFlight:
        world.post("/event", {"event": "nack_in_flight", "intent_ref": ref})
        return EXIT_NACK
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
        world = World(a.world, a.label or a.mode, msg["intent_ref"], delivery)
        return naive(world, msg) if client is None else with_intentd(world, msg, client, a.tenant)

    if a.message:
        return handle(json.loads(a.message), a.delivery)
    print("ready", flush=True)
    for line in sys.stdin:
        d = json.loads(line)
        try:
            rc = handle(d["message"], d["delivery"])
        except Exception as e:  # noqa: BLE001 - a consumer reports and nacks
            sys.stderr.write(f"bot: {d['message']['intent_ref']}: {e!r}\n")
            rc = EXIT_NACK
        print("ack" if rc == 0 else "nack", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
