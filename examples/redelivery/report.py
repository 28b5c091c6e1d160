"""Prints the demo's figures side by side and checks them."""

from __future__ import annotations

import json
from collections import Counter
from decimal import Decimal
from typing import Any, Dict, List

from provider import INPUT_TOKENS, OUTPUT_TOKENS, extract

# The seed article's prices: R$ 0.015 / R$ 0.075 per thousand tokens.
PRICE_IN = Decimal("0.015")
PRICE_OUT = Decimal("0.075")
TOKENS_PER_CALL = INPUT_TOKENS + OUTPUT_TOKENS
COST_PER_CALL = (INPUT_TOKENS * PRICE_IN + OUTPUT_TOKENS * PRICE_OUT) / 1000  # R$ 0.165


def _n(x: int) -> str:
    return f"{x:,}"


def _brl(x: Decimal) -> str:
    return "R$ " + f"{x.quantize(Decimal('0.01')):,}"


def _figures(mode: str, messages: List[dict], queue, stats, world) -> Dict[str, Any]:
    charges = {m["intent_ref"]: world.charges[mode].get(m["intent_ref"], [])
               for m in messages}
    counts = [len(v) for v in charges.values()]
    truth = {m["intent_ref"]: Decimal(extract(m["text"])["valor"]) for m in messages}
    wrong = sum(1 for ref, v in charges.items() if any(Decimal(x) != truth[ref] for x in v))
    return {
        "deliveries": stats.deliveries, "redeliveries": stats.redeliveries,
        "killed": world.kills[mode], "twins": stats.twins,
        "charges": sum(counts), "dup_intents": sum(1 for c in counts if c > 1),
        "max": max(counts) if counts else 0, "none": sum(1 for c in counts if c == 0),
        "two_values": sum(1 for v in charges.values() if len(set(map(Decimal, v))) > 1),
        "wrong": wrong,
        "model_calls": world.model_calls[mode], "variants": world.model_variants[mode],
        "unfinished": len(set(m["id"] for m in messages) - queue.done),
        "counts": counts,
        # Per message: model calls, and the kills during one (before the
        # intent was frozen: the only reason the model may run again).
        "calls": [world.model_calls_by_ref[mode].get(m["intent_ref"], 0) for m in messages],
        "model_kills": [world.model_kills_by_ref[mode].get(m["intent_ref"], 0)
                        for m in messages],
        "per_message_deliveries": [queue.stats.per_message.get(m["id"], 0) for m in messages],
    }


def print_all(messages, queues, results, world, before, after, extra, timing: str) -> bool:
    nv = _figures("naive", messages, queues["naive"], results["naive"], world)
    it = _figures("intentd", messages, queues["intentd"], results["intentd"], world)
    events = world.events["intentd"]
    raced = Counter(e["intent_ref"] for e in events if e.get("event") == "model_raced")
    it["raced"] = [raced.get(m["intent_ref"], 0) for m in messages]
    skipped = sum(1 for e in events if e.get("event") == "model_skipped")
    outcomes = Counter(e["decision"] for e in events if e.get("event") == "outcome")
    diverged = sum(1 for e in events if e.get("event") == "outcome" and e.get("diverged"))
    polls = sum(e.get("waited_polls", 0) for e in events if e.get("event") == "outcome")
    dec = {k: after["decisions"].get(k, 0) - before["decisions"].get(k, 0)
           for k in ("execute", "replay", "in_flight", "recover")}
    absorbed = it["redeliveries"] - max(0, it["charges"] - len(messages))
    m = len(messages)

    rows = [
        ("payment messages", _n(m), _n(m)),
        ("deliveries (of which redeliveries)", f"{nv['deliveries']} ({nv['redeliveries']})",
         f"{it['deliveries']} ({it['redeliveries']})"),
        ("bots SIGKILLed mid-call", _n(nv["killed"]), _n(it["killed"])),
        ("redelivered while the first bot still ran", _n(nv["twins"]), _n(it["twins"])),
        ("charges executed at the provider", _n(nv["charges"]), _n(it["charges"])),
        ("intents charged more than once", f"{nv['dup_intents']} of {m}",
         f"{it['dup_intents']} of {m}"),
        ("most charges for one intent", _n(nv["max"]), _n(it["max"])),
        ("intents charged two different values", _n(nv["two_values"]), _n(it["two_values"])),
        ("intents charged a value not on the invoice *", _n(nv["wrong"]), _n(it["wrong"])),
        ("redeliveries absorbed (no new charge)", "0", f"{absorbed} of {it['redeliveries']}"),
        ("model calls (8,000 in + 600 out tokens)", _n(nv["model_calls"]),
         _n(it["model_calls"])),
        ("  of which worded differently", _n(nv["variants"]), _n(it["variants"])),
        ("model tokens spent", _n(nv["model_calls"] * TOKENS_PER_CALL),
         _n(it["model_calls"] * TOKENS_PER_CALL)),
        ("model calls skipped (intent already frozen)", "-", _n(skipped)),
    ]
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows + [("", "naive: uuid4 per attempt", "")])
    print(f"\nRedelivery demo: {m} payment messages, bots SIGKILLed mid-call, {timing}\n")
    print(f"  {'':{w0}}  {'naive: uuid4 per attempt':>{w1}}  {'intentd':>10}")
    for label, a, b in rows:
        print(f"  {label:{w0}}  {a:>{w1}}  {b:>10}")
    _print_per_message(messages, nv, it)
    saved_tokens = skipped * TOKENS_PER_CALL
    print(f"\n  The intentd bot's extraction ran only while no intent was frozen; skipped: "
          f"{_n(skipped)} calls, {_n(saved_tokens)} tokens,\n  {_brl(skipped * COST_PER_CALL)} "
          f"not spent at the seed's prices (R$ {COST_PER_CALL.normalize()}"
          f" a call). The naive bot spent {_n(max(0, nv['model_calls'] - m))} calls "
          f"beyond one per message.")
    print(f"  intentd decisions in this run: execute {dec['execute']}, replay {dec['replay']}, "
          f"recover {dec['recover']}, in_flight {dec['in_flight']} (polls while a live bot "
          f"held the lease);\n  bot outcomes: "
          + ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items()))
          + (f"; {diverged} redelivered extraction(s) differed from the frozen intent and "
             f"were discarded." if diverged else "."))
    print("  * the model misreads a value now and then: the naive bot pays whatever this "
          "attempt read;\n    intentd pays what the first attempt froze, once, and a "
          "misread frozen value is fixed with amend (below).")

    _print_scenarios(extra)
    _print_webhook(extra["webhook"])
    return _check(nv, it, m, extra)


def _print_per_message(messages: List[dict], nv: Dict[str, Any], it: Dict[str, Any]) -> None:
    """One line per customer message: the invoice the bot found by the sender's
    number, and per bot its deliveries, the kills during the model call
    (before anything was frozen), the model calls and the charges."""
    print("\n  per message (the anchor: the open invoice of the sender's number):")
    print(f"    {'message id':24} {'invoice':16} {'naive: deliv':>12} {'killed@model':>12} "
          f"{'model':>5} {'charges':>7} | {'intentd: deliv':>14} {'killed@model':>12} "
          f"{'model':>5} {'charges':>7}")
    for i, m in enumerate(messages):
        shown = m["id"][:10] + "..." + m["id"][-11:]
        print(f"    {shown:24} {m['intent_ref']:16} {nv['per_message_deliveries'][i]:>12} "
              f"{nv['model_kills'][i]:>12} {nv['calls'][i]:>5} {nv['counts'][i]:>7} | "
              f"{it['per_message_deliveries'][i]:>14} {it['model_kills'][i]:>12} "
              f"{it['calls'][i]:>5} {it['counts'][i]:>7}")
    print(f"    {'total':41} {sum(nv['per_message_deliveries']):>12} {sum(nv['model_kills']):>12} "
          f"{sum(nv['calls']):>5} {sum(nv['counts']):>7} | "
          f"{sum(it['per_message_deliveries']):>14} {sum(it['model_kills']):>12} "
          f"{sum(it['calls']):>5} {sum(it['counts']):>7}")
    bound = len(messages) + sum(it["model_kills"]) + sum(it["raced"])
    raced = (f" + extractions raced by a second delivery running at once {sum(it['raced'])}"
             if sum(it["raced"]) else "")
    print(f"  intentd: model calls {sum(it['calls'])} <= messages + kills during the model "
          f"call{raced} = {bound}; charges {sum(it['counts'])} = invoices {len(messages)}")


def _print_scenarios(extra: Dict[str, Any]) -> None:
    c = extra["cpf"]
    print("\nCPF punctuation: '111.222.333-96' and '11122233396' (and 180.00 vs 180)")
    print(f"  intentd key: {c['key_punctuated'][:20]}... vs {c['key_plain'][:20]}... "
          f"-> {'the same key' if c['same'] else 'DIFFERENT KEYS'}; the redelivery "
          f"diverged: {c['redelivery_diverged']}")
    print(f"  uuid4 per attempt: {c['uuid_a'][:18]}... vs {c['uuid_b'][:18]}... -> two charges")

    a = extra["amend"]
    print("\nCorrection: R$ 180.00 charged, then the intent corrected to R$ 1,800.00")
    print(f"  amend without force while completed: refused ({a['refused']})")
    print(f"  amend --force: key {a['amended']['previous_key'][:16]}... -> "
          f"{a['amended']['key'][:16]}...; next begin: {a['second'].decision}, "
          f"provider charged {a['second'].response['valor']} "
          f"({'new charge' if not a['second'].response['replayed'] else 'REPLAYED'})")
    print(f"  a persisted uuid4 would keep the old key: the provider answers "
          f"{a['stale']['valor']} (replayed={a['stale']['replayed']}), not 1800.00")
    print(f"  charges for this invoice: {a['charges']}")

    u = extra["uncertain"]
    print("\nUncertain outcome: a bot SIGKILLed after the provider acted, before complete")
    if u["listed"]:
        e = u["listed"][0]
        print(f"  uncertain lists it: {e['intent_ref']} key {e['key'][:16]}... attempt "
              f"{e['attempt']} lease_token {e['lease_token']}")
    print(f"  next attempt: {u['act'].decision} (previous lease token "
          f"{u['act'].previous_lease_token}), same key; the provider replayed: "
          f"{u['act'].response.get('replayed')}; status {u['act'].status}; "
          f"charges: {u['charges']}")

    r = extra["reconcile"]
    print("\nReconcile: a bot SIGKILLed after the provider charged, and no redelivery yet")
    if r["listed"]:
        e = r["listed"][0]
        print(f"  uncertain lists it: {e['intent_ref']} key {e['key'][:16]}... attempt "
              f"{e['attempt']} lease_token {e['lease_token']}")
    print(f"  intentd reconcile --once --json (exit {r['exit']}), the command hook "
          "provider_status.py asks the provider (GET /charge/KEY):")
    for line in r["lines"]:
        print(f"    {json.dumps({k: line.get(k) for k in _RECONCILE_SHOWN})}")
    if not r["lines"]:
        print(f"    (no JSON line) {r['stdout'].strip()[:200]} {r['stderr'][:200]}")
    a = r["action"]
    print(f"  the action: {a['status']}, lease token {a['lease_token']}, response "
          f"{(a.get('response') or {}).get('charge_id')} (the provider's record)")
    print(f"  the redelivery: {r['redelivery']}; POST /charge calls since: "
          f"{r['charge_posts']}; charges: {r['charges']}")


_RECONCILE_SHOWN = ("intent_ref", "provider", "provider_said", "recorded", "cause")


def _webhook_figures(w: Dict[str, Any]) -> Dict[str, Dict[str, int]]:
    out = {}
    for mode in ("webhook-naive", "webhook-seen"):
        calls = [msg["calls"][mode] for msg in w["messages"]]
        out[mode] = {
            "calls": sum(calls),
            # model calls beyond one per message: redelivered messages that
            # reached the model again
            "again": sum(max(0, c - 1) for c, msg in zip(calls, w["messages"])),
            # accepted messages that never reached the model
            "missed": sum(1 for c, msg in zip(calls, w["messages"])
                          if msg["delivered"] and not c),
            # rejected (forged) messages that did
            "forged": sum(c for c, msg in zip(calls, w["messages"]) if not msg["delivered"]),
        }
    return out


def _print_webhook(w: Dict[str, Any]) -> None:
    f = _webhook_figures(w)
    nv, sn = f["webhook-naive"], f["webhook-seen"]
    delivered = sum(msg["delivered"] for msg in w["messages"])
    redelivered = sum(max(0, msg["delivered"] - 1) for msg in w["messages"])
    print("\nWhatsApp webhook redelivery: Meta POSTs a signed Cloud API webhook "
          f"(X-Hub-Signature-256), then redelivers it ({w['seconds']:.1f} s)")
    for label, naive_code, seen_code in w["deliveries"]:
        answer = f"{naive_code}" if naive_code == seen_code else f"{naive_code} / {seen_code}"
        print(f"  {label:44} -> HTTP {answer}")
    rows = [
        ("messages delivered (of which redelivered)", f"{delivered} ({redelivered})",
         f"{delivered} ({redelivered})"),
        ("model calls (8,000 in + 600 out tokens)", _n(nv["calls"]), _n(sn["calls"])),
        ("redeliveries that reached the model", f"{nv['again']} of {redelivered}",
         f"{sn['again']} of {redelivered}"),
        ("seen calls (one batch per accepted webhook)", "-", _n(w["seen_calls"])),
    ]
    w0 = max(len(r[0]) for r in rows)
    print(f"\n  {'':{w0}}  {'naive receiver':>14}  {'receiver with seen':>18}")
    for label, a, b in rows:
        print(f"  {label:{w0}}  {a:>14}  {b:>18}")
    print("\n  model calls per message id (counted by the provider's POST /model):")
    print(f"    {'message id':28} {'asks for':17} {'deliveries':>10} {'naive':>6} {'seen':>5}")
    for msg in w["messages"]:
        shown = msg["id"][:10] + "..." + msg["id"][-14:]
        count = str(msg["delivered"]) if msg["delivered"] else "0 (403)"
        print(f"    {shown:28} {msg['ref']:17} {count:>10} "
              f"{msg['calls']['webhook-naive']:>6} {msg['calls']['webhook-seen']:>5}")
    saved = nv["calls"] - sn["calls"]
    print(f"\n  The receiver with seen handed only first sightings to the bot: {_n(saved)} "
          f"model calls, {_n(saved * TOKENS_PER_CALL)} tokens,\n  "
          f"{_brl(saved * COST_PER_CALL)} not spent. seen saves the model call; the money "
          "behind it is begin/complete's (above).")
    st = w["stats_seen"]
    if st is not None:
        print(f"  agent stats, seen (messages and statuses): first +{st['first']}, "
              f"duplicates +{st['duplicates']}, reclaimed +{st['reclaimed']}")


def _check(nv, it, m, extra) -> bool:
    problems = []
    if it["counts"] != [1] * m:
        problems.append(f"intentd: charges per intent {it['counts']}, want exactly 1 each")
    if it["unfinished"]:
        problems.append(f"intentd: {it['unfinished']} message(s) never acked")
    # The model runs once per message, plus once for each attempt killed
    # during its model call (nothing was frozen yet); a redelivery of a
    # frozen intent never calls it.
    # Two deliveries of one message running at once (the visibility timeout
    # ran out) may both extract before either froze: counted apart.
    over = [(i, c, k) for i, c, k, r in zip(range(m), it["calls"], it["model_kills"],
                                            it["raced"]) if c > 1 + k + r]
    if over or sum(it["calls"]) > m + sum(it["model_kills"]) + sum(it["raced"]):
        problems.append(f"intentd: model calls {sum(it['calls'])} > messages {m} + kills "
                        f"during the model call {sum(it['model_kills'])} (messages "
                        f"{[i + 1 for i, _, _ in over]})")
    if nv["dup_intents"] == 0:
        problems.append("naive: no intent was charged twice (the chaos did not bite)")
    if not extra["cpf"]["same"]:
        problems.append("CPF punctuation changed the key")
    a = extra["amend"]
    if a["second"].response["replayed"] or len(a["charges"]) != 2 or not a["stale"]["replayed"]:
        problems.append(f"amend: charges {a['charges']}")
    u = extra["uncertain"]
    if u["act"].decision != "recover" or len(u["charges"]) != 1 or not u["listed"]:
        problems.append(f"uncertain: {u['act'].decision}, charges {u['charges']}")
    r = extra["reconcile"]
    recorded = [line.get("recorded") for line in r["lines"]]
    stored = dict(r["stored"] or {})
    if r["exit"] != 0 or recorded != ["completed"] or r["action"]["status"] != "completed" \
            or r["action"].get("response") != stored or r["redelivery"] != "replay" \
            or r["charge_posts"] != 0 or len(r["charges"]) != 1 or not r["listed"]:
        problems.append(f"reconcile: exit {r['exit']}, recorded {recorded}, action "
                        f"{r['action']['status']}, redelivery {r['redelivery']}, charges "
                        f"{r['charges']}, POST /charge since {r['charge_posts']} "
                        f"{r['stderr'][-300:]}")
    w = extra["webhook"]
    wf = _webhook_figures(w)
    if wf["webhook-seen"]["again"]:
        problems.append(f"webhook: {wf['webhook-seen']['again']} redelivered message(s) "
                        "reached the model through the receiver with seen")
    if wf["webhook-seen"]["missed"]:
        problems.append(f"webhook: {wf['webhook-seen']['missed']} accepted message(s) never "
                        "reached the model")
    if wf["webhook-naive"]["again"] == 0:
        problems.append("webhook: the naive receiver called the model once per message "
                        "(the redelivery did not bite)")
    if wf["webhook-naive"]["forged"] or wf["webhook-seen"]["forged"]:
        problems.append("webhook: a forged webhook reached the model")
    codes = [(naive, seen) for _, naive, seen in w["deliveries"]]
    if codes != [(200, 200)] * (len(codes) - 1) + [(403, 403)]:
        problems.append(f"webhook: HTTP answers {codes}, want 200 and 403 for the forged one")
    if w["seen_calls"] != w["accepted_posts"]:
        problems.append(f"webhook: {w['seen_calls']} seen calls for {w['accepted_posts']} "
                        "webhooks, want one batch each")
    problems.extend(w["errors"])
    print()
    for p in problems:
        print(f"FAILED: {p}")
    if not problems:
        print("OK: intentd executed exactly one charge per intent and called the model "
              f"{sum(it['calls'])} times for {m} messages (attempts killed during the model call: "
              f"{sum(it['model_kills'])}); the naive bot charged "
              f"{nv['dup_intents']} of {m} intents more than once; reconcile completed the "
              "uncertain charge from the provider's record and its redelivery replayed it; "
              "no redelivered webhook message reached the model through seen.")
    return not problems
