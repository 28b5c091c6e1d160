#!/usr/bin/env python3
"""The demo's reconcile hook: what the payment provider says about one
uncertain charge.

`intentd reconcile` runs it once per uncertain action of the action types
configured with it (the config's "reconcile" member):

    "reconcile": {"pix.cobranca": {"command": ["/usr/bin/python3",
        "/path/to/provider_status.py", "--world", "http://127.0.0.1:PORT"],
        "timeout_ms": 5000}}

stdin   the action record as one JSON line (tenant_id, key, txid,
        action_type, intent_ref, lease_token, ..., and the frozen payload)
stdout  one line: the provider's own record of the charge made under the
        action's key (the Idempotency-Key every attempt sent):
          {"outcome": "completed", "response": {...the charge...}}
          {"outcome": "not_executed"}   no request with that key was executed
          {"outcome": "unknown"}        the provider could not be asked

"not_executed" releases the action and the next attempt charges again, with
the same key: should a request of the dead bot still reach the provider
afterwards, the provider deduplicates it by that key. Anything doubtful is
"unknown": intentd then records nothing and the action stays uncertain.
Standard library only.
"""

from __future__ import annotations

import argparse
import http.client
import json
import sys
import urllib.parse


def ask(world: str, key: str) -> dict:
    host, port = world.split("//", 1)[1].rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=5)
    try:
        conn.request("GET", "/charge/" + urllib.parse.quote(key, safe=""))
        resp = conn.getresponse()
        body = resp.read()
    except OSError as e:
        return {"outcome": "unknown", "detail": f"provider unreachable: {e}"}
    finally:
        conn.close()
    if resp.status == 200:
        try:
            charge = json.loads(body)["charge"]
        except (ValueError, KeyError, TypeError):
            return {"outcome": "unknown", "detail": "provider answered 200 without a charge"}
        return {"outcome": "completed", "response": charge,
                "detail": f"charge {charge.get('charge_id')} found"}
    if resp.status == 404:
        return {"outcome": "not_executed", "detail": "no charge under this Idempotency-Key"}
    return {"outcome": "unknown", "detail": f"provider answered HTTP {resp.status}"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--world", required=True, help="the demo provider's URL")
    a = ap.parse_args()
    try:
        record = json.loads(sys.stdin.readline())
        key = record["key"]
    except (ValueError, KeyError, TypeError) as e:
        print(json.dumps({"outcome": "unknown", "detail": f"no action record on stdin: {e}"}))
        return 0
    print(json.dumps(ask(a.world, key)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
