"""Payloads for the tests: valid Pix keys and unique intent references."""

from __future__ import annotations

import itertools
import os

_counter = itertools.count(1)
RUN = os.urandom(3).hex()


def cpf(nine_digits: str, punctuated: bool = True) -> str:
    """A CPF with valid check digits, e.g. cpf("111222333") = 111.222.333-96."""
    d = [int(c) for c in nine_digits]
    for n in (9, 10):
        s = sum(v * w for v, w in zip(d, range(n + 1, 1, -1)))
        r = s % 11
        d.append(0 if r < 2 else 11 - r)
    t = "".join(map(str, d))
    return f"{t[:3]}.{t[3:6]}.{t[6:9]}-{t[9:]}" if punctuated else t


def ref(prefix: str = "FAT") -> str:
    return f"{prefix}-{RUN}-{next(_counter):06d}"


def pix(intent_ref: str, valor="180.00", chave=None, cliente="01J9ZQ3K8V7M2N4P6R8T0W2Y4A"):
    return {"cliente_id": cliente, "valor": valor,
            "chave_pix_destino": chave or cpf("111222333"),
            "referencia_intencao": intent_ref}
