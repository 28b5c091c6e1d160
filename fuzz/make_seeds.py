#!/usr/bin/env python3
"""Writes the fuzz seed corpus: one directory per target under --out.

Built from the public key-derivation vectors (tests/vectors/
key-derivation.jsonl) plus a few protocol lines. Each seed is a file named by its SHA-1.
"""
import argparse
import hashlib
import json
import os
import sys

KINDS = {"text": 0, "trim": 1, "lower-trim": 2, "money": 3, "pix-key": 4}
FIELDS = {
    "pix.cobranca": {"cliente_id": "text", "valor": "money",
                     "chave_pix_destino": "pix-key", "referencia_intencao": "trim"},
    "email.cobranca": {"cliente_id": "text", "referencia_intencao": "trim",
                       "template": "lower-trim"},
}
ACTION_SELECTOR = {"pix.cobranca": 0, "email.cobranca": 1}

PIX = {"cliente_id": "01J9ZQ3K8V7M2N4P6R8T0W2Y4A", "valor": "180.00",
       "chave_pix_destino": "111.444.777-35"}
PROTOCOL_LINES = [
    {"id": 1, "op": "ping"},
    {"op": "stats"},
    {"id": "a", "op": "derive", "tenant_id": "acme", "action_type": "pix.cobranca",
     "payload": PIX},
    {"id": 2, "op": "freeze", "tenant_id": "acme", "intent_ref": "FAT-1",
     "action_type": "pix.cobranca", "payload": PIX},
    {"id": 3, "op": "begin", "tenant_id": "acme", "intent_ref": "FAT-1",
     "action_type": "pix.cobranca", "payload": PIX, "lease_ms": 1000},
    {"id": 4, "op": "begin", "tenant_id": "acme", "intent_ref": "FAT-1",
     "action_type": "pix.cobranca", "payload": dict(PIX, valor="1.800,00"),
     "on_divergence": "reject"},
    {"id": 5, "op": "complete", "tenant_id": "acme", "key": "0" * 64, "lease_token": 1,
     "response": {"txid": "e2e"}},
    {"id": 6, "op": "fail", "tenant_id": "acme", "key": "0" * 64, "lease_token": 1,
     "error": "timeout", "retriable": True},
    {"id": 7, "op": "renew", "tenant_id": "acme", "key": "0" * 64, "lease_token": 1,
     "lease_ms": 5000},
    {"id": 8, "op": "status", "tenant_id": "acme", "key": "0" * 64},
    {"id": 9, "op": "lookup", "tenant_id": "acme", "intent_ref": "FAT-1",
     "action_type": "pix.cobranca"},
    {"id": 10, "op": "amend", "tenant_id": "acme", "intent_ref": "FAT-1",
     "action_type": "pix.cobranca", "payload": dict(PIX, valor="1800.00"), "force": True},
    {"id": 11, "op": "uncertain", "limit": 10},
    {"id": 12, "op": "begin", "tenant_id": "acme", "intent_ref": "E-1",
     "action_type": "fuzz.every_kind",
     "payload": {"t": "x", "tr": " y ", "lt": " Z ", "m": 19.99, "k": "+5511987654321"}},
]
RAW_LINES = [b"", b"nope", b"[1]", b'{"op":"p\xc3\x28"}', b'{"id":18446744073709551615,"op":"ping"}',
             b'{"op":"ping"}\r']


def write(out, target, data):
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    name = hashlib.sha1(data).hexdigest()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def dumps(value):
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--vectors", required=True)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)

    lines = [dumps(x) for x in PROTOCOL_LINES] + RAW_LINES
    with open(a.vectors, encoding="utf-8") as f:
        vectors = [json.loads(line) for line in f if line.strip()]

    for v in vectors:
        action, version = v["action_type"], v["rules_version"]
        tenant, payload = v["tenant_id"], v["payload"]
        sel = ACTION_SELECTOR.get(action, 2)
        write(a.out, "derive", bytes([sel, version - 1]) + tenant.encode() + b"\n" +
              dumps(payload))
        ref = payload.get("referencia_intencao") if isinstance(payload, dict) else None
        base = {"tenant_id": tenant, "action_type": action, "payload": payload}
        for op in ("derive", "freeze", "begin"):
            req = dict(base, op=op, id=v["name"])
            if op != "derive":
                req["intent_ref"] = ref.strip() if isinstance(ref, str) and ref.strip() else v["name"]
            lines.append(dumps(req))
        if not isinstance(payload, dict):
            continue
        for field, kind in FIELDS.get(action, {}).items():
            if field not in payload:
                continue
            value = payload[field]
            for ver in (1, 2):
                if isinstance(value, str):
                    write(a.out, "normalize_field", bytes([KINDS[kind], ver - 1]) + value.encode())
                write(a.out, "normalize_field",
                      bytes([KINDS[kind] | 0x80, ver - 1]) + dumps(value))
            if kind == "money":
                write(a.out, "money", value.encode() if isinstance(value, str) else dumps(value))

    for line in lines:
        write(a.out, "request_line", line)
        # The framer sees the same lines with assorted limits and chunkings.
        write(a.out, "line_framer", bytes([0, 200, len(line) % 256]) + line + b"\n")
    write(a.out, "request_line", b"\n".join(lines[:14]))  # one pipelined session
    write(a.out, "line_framer", bytes([0, 16, 7]) + b"\n".join(lines[:6]) + b"\r\npartial")
    for money in ("180", "180.5", " 19.99 ", "\u00a0180.00\u3000", "0.01",
                  "92233720368547758.07", "92233720368547758.08", "10.005", "1e3", "1,5"):
        write(a.out, "money", money.encode())
    with open(os.path.join(a.out, ".stamp"), "w") as f:
        f.write(f"{len(vectors)} vectors\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
