"""The seed's side cases, run against the same agent and provider."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from typing import Any, Dict

import intentd_client
from bot import ACTION, TENANT, World

HERE = os.path.dirname(os.path.abspath(__file__))


def _payload(ref: str, valor: str, chave: str) -> dict:
    return {"cliente_id": "01J9ZQ3K8V7M2N4P6R8T0W2Y4A", "valor": valor,
            "chave_pix_destino": chave, "referencia_intencao": ref}


def _charge_with(world: World, ref: str):
    def charge(act: intentd_client.Action) -> dict:
        # The frozen amount in whole units and the frozen Pix key.
        return world.charge(act.key, ref, str(act.amount("valor")),
                            act.input["chave_pix_destino"], act.txid)
    return charge


def _customer(world, ref: str, phone: str, text: str) -> dict:
    """A WhatsApp message from a customer whose open invoice is ref."""
    world.open_invoices[phone] = {"invoice": ref, "cliente_id": "01J9ZQ3K8V7M2N4P6R8T0W2Y4A"}
    return {"id": f"wamid.HBgN{phone}FQIAEhgg{ref}", "from": phone, "text": text}


def cpf_punctuation(client: intentd_client.Client) -> Dict[str, Any]:
    """The article's Monday test: the same charge with the CPF punctuated
    and not, in two runs, must give the same key."""
    ref = "FAT-2026-CPF001"
    a = client.derive(TENANT, ACTION, _payload(ref, "180.00", "111.222.333-96"))["key"]
    b = client.derive(TENANT, ACTION, _payload(ref, "180", "11122233396"))["key"]
    client.freeze(TENANT, ref, ACTION, _payload(ref, "180.00", "111.222.333-96"))
    again = client.freeze(TENANT, ref, ACTION, _payload(ref, "180", "11122233396"))
    return {"key_punctuated": a, "key_plain": b, "same": a == b,
            "redelivery_diverged": again["diverged"],
            "uuid_a": str(uuid.uuid4()), "uuid_b": str(uuid.uuid4())}


def amend(client: intentd_client.Client, url: str, world_counts) -> Dict[str, Any]:
    """R$ 180.00 charged, then corrected to R$ 1,800.00: a new key, a new
    charge. A persisted uuid4 would keep the key, and the provider would
    answer the R$ 180.00 charge again."""
    ref = "FAT-2026-AMEND1"
    world = World(url, "scenario", ref, 1)
    chave = "111.222.333-96"
    first = client.run_action(TENANT, ref, ACTION, _payload(ref, "180.00", chave),
                              _charge_with(world, ref))
    try:
        client.amend(TENANT, ref, ACTION, _payload(ref, "1800.00", chave))
        refused = "accepted?!"
    except intentd_client.InvalidState as e:
        refused = e.message
    amended = client.amend(TENANT, ref, ACTION, _payload(ref, "1800.00", chave), force=True)
    second = client.run_action(TENANT, ref, ACTION, None, _charge_with(world, ref))
    # What a uuid4 persisted on the intent row would do: same key, new value.
    stale = world.charge(first.key, ref, "1800.00", chave, first.txid)
    return {"first": first, "refused": refused, "amended": amended, "second": second,
            "stale": stale, "charges": list(world_counts["scenario"].get(ref, []))}


def uncertain(client: intentd_client.Client, url: str, socket_path: str, world
              ) -> Dict[str, Any]:
    """A bot dies after the provider acted and before complete: the action is
    'started' with no response. Once its lease expires `uncertain` lists it,
    and the next attempt gets `recover`: it repeats the call with the same
    key, the provider answers the first charge again, and it completes."""
    ref = "FAT-2026-UNCERT"
    world.plan[(ref, 1)] = "kill_charge"
    msg = _customer(world, ref, "5511990000001", "Pix de R$ 420,00, chave 111.222.333-96")
    rc = subprocess.call([sys.executable, "-S", os.path.join(HERE, "bot.py"), "--mode", "intentd",
                          "--world", url, "--message", json.dumps(msg), "--delivery", "1",
                          "--socket", socket_path, "--label", "scenario"])
    action = client.lookup(TENANT, ref, ACTION)["action"]
    time.sleep(max(0.0, action["lease_until_ms"] / 1000 - time.time()) + 0.1)
    listed = [u for u in client.uncertain(TENANT) if u["intent_ref"] == ref]
    attempt = World(url, "scenario", ref, 2)
    act = client.run_action(TENANT, ref, ACTION, None, _charge_with(attempt, ref), lease_ms=1000)
    return {"bot_exit": rc, "listed": listed, "act": act,
            "charges": list(world.charges["scenario"].get(ref, []))}


# The reconcile case has a tenant of its own, so that the pass lists only it.
RECONCILE_TENANT = "acme-reconcile"


def reconcile_config(url: str) -> Dict[str, Any]:
    """The agent's config member that `intentd reconcile` reads: pix.cobranca
    is asked about through the command hook provider_status.py."""
    return {"reconcile": {ACTION: {
        "command": [sys.executable, os.path.join(HERE, "provider_status.py"), "--world", url],
        "timeout_ms": 5000}}}


def reconcile(client: intentd_client.Client, url: str, agent, plan, world) -> Dict[str, Any]:
    """A bot is SIGKILLed right after the provider charged, and this time no
    redelivery comes to recover it. `intentd reconcile --once --json` asks the
    provider through the command hook (provider_status.py: GET /charge/KEY,
    the provider's record under the action's Idempotency-Key), finds the
    charge and completes the action with it. The message redelivered later
    replays the stored response: no second call to the provider."""
    ref = "FAT-2026-RECON1"
    plan[(ref, 1)] = "kill_charge"
    msg = _customer(world, ref, "5511990000002", "Pix de R$ 310,00, chave 111.444.777-35")
    bot = [sys.executable, "-S", os.path.join(HERE, "bot.py"), "--mode", "intentd",
           "--world", url, "--message", json.dumps(msg), "--socket", agent.socket,
           "--label", "reconcile", "--tenant", RECONCILE_TENANT]
    killed = subprocess.call(bot + ["--delivery", "1"])
    found = client.lookup(RECONCILE_TENANT, ref, ACTION)
    key = found["key"]
    time.sleep(max(0.0, found["action"]["lease_until_ms"] / 1000 - time.time()) + 0.1)
    listed = [u for u in client.uncertain(RECONCILE_TENANT) if u["intent_ref"] == ref]
    posts_before = world.charge_posts[key]
    ran = subprocess.run([agent.binary, "reconcile", "--once", "--json", "--socket", agent.socket,
                          "--config", agent.config, "--tenant", RECONCILE_TENANT],
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    try:
        lines = [json.loads(line) for line in ran.stdout.splitlines() if line.strip()]
    except ValueError:
        lines = []
    after = client.status(RECONCILE_TENANT, key)["action"]
    redelivered = subprocess.call(bot + ["--delivery", "2"])
    outcomes = [e for e in world.events["reconcile"]
                if e.get("event") == "outcome" and e.get("intent_ref") == ref]
    return {"ref": ref, "key": key, "bot_exit": killed, "listed": listed,
            "exit": ran.returncode, "stdout": ran.stdout, "stderr": ran.stderr.strip(),
            "lines": lines, "action": after, "stored": world.stored.get(key),
            "redelivery_exit": redelivered,
            "redelivery": outcomes[-1]["decision"] if outcomes else None,
            "charge_posts": world.charge_posts[key] - posts_before,
            "status_lookups": world.status_lookups[key],
            "charges": list(world.charges["reconcile"].get(ref, []))}


def run_all(client, world, url, agent) -> Dict[str, Any]:
    return {"cpf": cpf_punctuation(client),
            "amend": amend(client, url, world.charges),
            "uncertain": uncertain(client, url, agent.socket, world),
            "reconcile": reconcile(client, url, agent, world.plan, world)}
