#!/usr/bin/env python3
"""The seed scenario end to end: a queue redelivers payment messages to bots
that get SIGKILLed mid-call, once with a naive bot (uuid4 per attempt) and
once with a bot that uses intentd. One command:

    python3 examples/redelivery/run.py --intentd build/agent/intentd

Prints, side by side, the charges executed per intent, the redeliveries
absorbed and the model tokens the intentd bot did not spend; then the CPF
punctuation case, the 180.00 -> 1800.00 correction (amend), an uncertain
outcome resolved with recover, another resolved by `intentd reconcile` from
the provider's record (a command hook), and a signed WhatsApp webhook that
Meta redelivers, de-duplicated with `seen` before the model. Exits 1 when the
figures are wrong (intentd: exactly one charge per intent; naive: more than
one for some; reconcile did not complete the uncertain charge, or its
redelivery charged again; a redelivered webhook message reached the model
through seen).
"""

from __future__ import annotations

import argparse
import glob
import os
import random
import sys
import threading
import time
from typing import Dict, List, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "clients", "python"))
sys.path.insert(0, HERE)

import intentd_client  # noqa: E402
import provider  # noqa: E402
import report  # noqa: E402
import scenarios  # noqa: E402
import webhook_sim  # noqa: E402
from agent import Agent  # noqa: E402
from queue_sim import Queue, bot_command  # noqa: E402


def cpf(nine: str) -> str:
    d = [int(c) for c in nine]
    for n in (9, 10):
        r = sum(v * w for v, w in zip(d, range(n + 1, 1, -1))) % 11
        d.append(0 if r < 2 else 11 - r)
    t = "".join(map(str, d))
    return f"{t[:3]}.{t[3:6]}.{t[6:9]}-{t[9:]}"


def make_messages(n: int, rng: random.Random) -> Tuple[List[dict], Dict[str, dict]]:
    """The customers' WhatsApp messages (what the queue delivers: the message
    id, the sender's number and the text; no invoice number), and the billing
    system's open invoice per number, where the bot finds its anchor."""
    messages, invoices = [], {}
    for i in range(1, n + 1):
        phone = f"55119{rng.randrange(1000, 10000)}{i:04d}"  # unique per message
        invoices[phone] = {"invoice": f"FAT-2026-{i:06d}",
                           "cliente_id": f"01J9ZQ3K8V7M2N4P6R8T{i:06d}"}
        reais = rng.choice([180, 250, 1800, 99, 420, 1234])
        valor = f"{reais:,}".replace(",", ".") + f",{rng.choice([0, 0, 50, 90]):02d}"
        chave = cpf(f"{rng.randrange(10**8, 10**9)}")
        messages.append({"id": f"wamid.HBgN{phone}FQIAEhgg{i:06d}", "from": phone,
                         "text": f"Oi! Pode mandar o Pix da minha fatura de R$ {valor} "
                                 f"para a chave {chave}? Obrigado"})
    return messages, invoices


def make_plan(messages: List[dict], rng: random.Random) -> Dict[Tuple[str, int], str]:
    """Chaos per (invoice, delivery): the same for both bots. The first
    message always loses its bot mid-call, so the smoke run has a case."""
    plan = {}
    for i, m in enumerate(messages):
        ref = m["intent_ref"]
        for delivery, p_kill in ((1, 0.6), (2, 0.35), (3, 0.15)):
            roll = rng.random()
            if (i == 0 and delivery == 1) or roll < p_kill * 0.75:
                plan[(ref, delivery)] = "kill_charge"
            elif roll < p_kill:
                plan[(ref, delivery)] = "kill_model"
            elif delivery == 1 and roll < p_kill + 0.15:
                plan[(ref, delivery)] = "slow"
    return plan


def find_intentd(given: str) -> str:
    if given:
        return given
    found = sorted((p for p in glob.glob(os.path.join(REPO, "build*", "agent", "intentd"))
                    if os.access(p, os.X_OK)), key=os.path.getmtime, reverse=True)
    if not found:
        sys.exit("run.py: no intentd binary; pass --intentd build/agent/intentd")
    return found[0]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--intentd", default="", help="the agent binary (default: build*/agent/intentd)")
    ap.add_argument("--messages", type=int, default=12, help="payment messages (default 12)")
    ap.add_argument("--consumers", type=int, default=3, help="bot processes per queue")
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--budget", type=float, default=60.0, help="seconds before giving up")
    ap.add_argument("--smoke", action="store_true", help="shorter delays (for ctest)")
    a = ap.parse_args()
    if a.messages < 1:
        ap.error("--messages must be at least 1")
    t0 = time.monotonic()
    rng = random.Random(a.seed)
    messages, invoices = make_messages(a.messages, rng)
    # What the report and the chaos plan know and the bots do not: the
    # invoice each message is about.
    records = [dict(m, intent_ref=invoices[m["from"]]["invoice"]) for m in messages]
    plan = make_plan(records, rng)
    speed = 0.5 if a.smoke else 1.0
    world = provider.World(plan, a.seed, charge_delay=0.15 * speed, slow_delay=2.4 * speed,
                           model_delay=0.1 * speed)
    world.open_invoices.update(invoices)
    server = provider.serve(world)
    url = f"http://127.0.0.1:{server.server_address[1]}"
    agent = Agent(find_intentd(a.intentd)).start(config=scenarios.reconcile_config(url))
    try:
        client = intentd_client.Client(agent.socket)
        before = client.stats()
        bot = os.path.join(HERE, "bot.py")
        vt = 1.5 * speed + 0.3
        queues = {mode: Queue(messages, bot_command(bot, mode, url, agent.socket),
                              a.consumers, visibility_timeout=vt, max_deliveries=10)
                  for mode in ("naive", "intentd")}
        results = {}
        deadline = time.monotonic() + a.budget
        threads = [threading.Thread(target=lambda m=m: results.__setitem__(
            m, queues[m].run(deadline))) for m in queues]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        after = client.stats()
        t_queues = time.monotonic() - t0
        extra = scenarios.run_all(client, world, url, agent)
        t_sides = time.monotonic() - t0 - t_queues
        extra["webhook"] = webhook_sim.run(client, world, url, a.seed)
        total = time.monotonic() - t0
        timing = (f"{total:.1f} s (queues {t_queues:.1f} s, side cases {t_sides:.1f} s, "
                  f"webhook {extra['webhook']['seconds']:.1f} s)")
        ok = report.print_all(records, queues, results, world, before, after, extra, timing)
        client.close()
        return 0 if ok else 1
    finally:
        for q in locals().get("queues", {}).values():
            q.close()
        agent.stop()
        server.shutdown()


if __name__ == "__main__":
    sys.exit(main())
