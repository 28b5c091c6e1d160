#!/usr/bin/env python3
"""Checks the worked examples of docs/key-derivation.md against the real binary.

For every example (a ```json block with "hmac_key" and "expect", followed by a
```text block with its HMAC input) it checks that:
  - the example is consistent: txid, the canonical form's members, the HMAC
    input bytes and their count;
  - `intentd derive` gives exactly the documented key, txid, normalized payload
    and rules version, and the canonical form built from its payload is the
    documented one;
  - the document's short Python snippet computes the key from the documented
    canonical form and secret;
  - the document's Python reference implementation computes the canonical form
    and the key from the example's inputs.
It also runs the reference implementation over tests/vectors/key-derivation.jsonl.

Usage: key_derivation_doc_test.py --intentd PATH --source-dir DIR
Prints one line per failure and "N passed, M failed" last; exits 1 on a failure.
Standard library only; works from any current directory.
"""
import argparse
import contextlib
import io
import json
import os
import re
import subprocess
import sys
import tempfile

DOC = os.path.join("docs", "key-derivation.md")
VECTORS = os.path.join("tests", "vectors", "key-derivation.jsonl")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```[ \t]*$", re.M | re.S)


class Checks:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def check(self, name, ok, why=""):
        if ok:
            self.passed += 1
        else:
            self.failed += 1
            print(f"FAIL {name}: {why}", flush=True)
        return ok


def canonical_text(document):
    """The contract's canonical JSON (what Python's json.dumps writes with these options)."""
    return json.dumps(document, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def decode_rendered(text):
    """The bytes of an HMAC input rendering: `\\xNN` is one byte, `\\\\` two backslashes."""
    out = bytearray()
    i = 0
    while i < len(text):
        if text.startswith("\\\\", i):
            out += b"\\\\"
            i += 2
        elif re.match(r"\\x[0-9a-f]{2}", text[i:i + 4]):
            out.append(int(text[i + 2:i + 4], 16))
            i += 4
        else:
            out += text[i].encode("utf-8")
            i += 1
    return bytes(out)


def read_examples(doc_text):
    """[(example, hmac_input_block_or_None)], and the ```python blocks."""
    fences = [(m.group(1), m.group(2)) for m in FENCE.finditer(doc_text)]
    examples, python_blocks = [], []
    for i, (lang, body) in enumerate(fences):
        if lang == "python":
            python_blocks.append(body)
            continue
        if lang != "json":
            continue
        try:
            value = json.loads(body)
        except ValueError:
            continue
        if not isinstance(value, dict) or "expect" not in value or "hmac_key" not in value:
            continue
        following = fences[i + 1] if i + 1 < len(fences) else None
        hmac_input = None
        if following and following[0] == "text" and following[1].startswith("HMAC input"):
            hmac_input = following[1]
        examples.append((value, hmac_input))
    return examples, python_blocks


def exec_block(code, label):
    namespace = {"__name__": "key_derivation_doc"}
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        exec(compile(code, label, "exec"), namespace)
    return namespace, stdout.getvalue()


def fields_of(example):
    config = example.get("config")
    if not config:
        return None
    return [(f["name"], f["kind"])
            for f in config["action_types"][example["action_type"]]["fields"]]


def run_derive(intentd, example, workdir):
    config_path = os.path.join(workdir, "config.json")
    with open(config_path, "w", encoding="utf-8") as f:
        json.dump(example.get("config", {}), f)
    key_path = os.path.join(workdir, "hmac-key")
    fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(example["hmac_key"] + "\n")
    os.chmod(key_path, 0o600)
    env = {k: v for k, v in os.environ.items()
           if k not in ("IDEMPOTENCY_HMAC_KEY", "CREDENTIALS_DIRECTORY")}
    args = [intentd, "derive", "--tenant", example["tenant_id"],
            "--action", example["action_type"],
            "--payload", json.dumps(example["payload"], ensure_ascii=False),
            "--rules-version", str(example["rules_version"]),
            "--config", config_path, "--hmac-key-file", key_path]
    return subprocess.run(args, capture_output=True, text=True, env=env, timeout=60)


def check_example(checks, example, hmac_input, intentd, short_ns, reference_ns, workdir):
    name = example.get("name", "?")
    expect = example["expect"]
    key, canonical = expect.get("key", ""), expect.get("canonical", "")
    canonical_bytes = canonical.encode("utf-8")

    # The example itself.
    document = {"a": example["action_type"], "p": expect.get("payload"),
                "t": example["tenant_id"], "v": example["rules_version"]}
    checks.check(f"{name}: canonical form", canonical_text(document) == canonical,
                 f"documented {canonical!r}, its members give {canonical_text(document)!r}")
    checks.check(f"{name}: txid", expect.get("txid") == key[:35] and len(key) == 64,
                 f"txid {expect.get('txid')!r} is not the first 35 of key {key!r}")
    if checks.check(f"{name}: HMAC input block", hmac_input is not None,
                    "no ```text block starting with 'HMAC input' after the example"):
        header, _, rendered = hmac_input.rstrip("\n").partition("\n")
        count = re.search(r"(\d+) bytes", header)
        checks.check(f"{name}: HMAC input byte count",
                     count is not None and int(count.group(1)) == len(canonical_bytes),
                     f"{header!r}, canonical form has {len(canonical_bytes)} bytes")
        checks.check(f"{name}: HMAC input bytes", decode_rendered(rendered) == canonical_bytes,
                     f"{rendered!r} does not render {canonical_bytes!r}")

    # The real binary.
    result = run_derive(intentd, example, workdir)
    try:
        derived = json.loads(result.stdout)
    except ValueError:
        derived = None
    if checks.check(f"{name}: intentd derive", result.returncode == 0 and isinstance(derived, dict),
                    f"exit {result.returncode}, stdout {result.stdout!r}, stderr {result.stderr!r}"):
        checks.check(f"{name}: derive key", derived.get("key") == key,
                     f"derive gives {derived.get('key')!r}, the document says {key!r}")
        checks.check(f"{name}: derive txid", derived.get("txid") == expect.get("txid"),
                     f"derive gives {derived.get('txid')!r}")
        checks.check(f"{name}: derive payload", derived.get("payload") == expect.get("payload"),
                     f"derive gives {derived.get('payload')!r}")
        checks.check(f"{name}: derive rules_version",
                     derived.get("rules_version") == example["rules_version"],
                     f"derive gives {derived.get('rules_version')!r}")
        rebuilt = canonical_text({"a": example["action_type"], "p": derived.get("payload"),
                                  "t": example["tenant_id"], "v": derived.get("rules_version")})
        checks.check(f"{name}: canonical form of derive's payload", rebuilt == canonical,
                     f"{rebuilt!r}")

    # The short snippet: the key from the documented canonical form and secret.
    if short_ns is not None:
        got = short_ns["idempotency_key"](example["hmac_key"], canonical_bytes)
        checks.check(f"{name}: short Python snippet", got == key, f"it gives {got!r}")

    # The reference implementation: everything from the inputs.
    if reference_ns is not None:
        try:
            got_canonical = reference_ns["canonical"](
                example["tenant_id"], example["action_type"], example["payload"],
                example["rules_version"], fields_of(example))
            got_key = reference_ns["idempotency_key"](example["hmac_key"], got_canonical)
            ok = got_canonical == canonical_bytes and got_key == key
            why = f"it gives {got_canonical!r} and {got_key!r}"
        except Exception as e:  # a failure of the documented code is a finding
            ok, why = False, f"raised {e!r}"
        checks.check(f"{name}: Python reference", ok, why)


def check_vectors(checks, reference_ns, vectors_path):
    with open(vectors_path, encoding="utf-8") as f:
        lines = [line for line in f if line.strip()]
    checks.check("vectors: file has vectors", len(lines) >= 50, f"{len(lines)} lines")
    for line in lines:
        vector = json.loads(line)
        expect = vector["expect"]
        name = f"vector {vector['name']}: Python reference"
        try:
            if vector["action_type"] not in reference_ns["BUILTIN_TYPES"]:
                raise reference_ns["DerivationError"]("unknown_action_type", "")
            got = reference_ns["canonical"](vector["tenant_id"], vector["action_type"],
                                            vector["payload"], vector["rules_version"])
            got_key = reference_ns["idempotency_key"](vector["hmac_key"], got)
            ok = ("key" in expect and got_key == expect["key"]
                  and got.decode("utf-8") == expect["canonical"]
                  and json.loads(got)["p"] == expect["payload"])
            why = f"gives {got!r} {got_key!r}"
        except reference_ns["DerivationError"] as e:
            ok = (expect.get("error") == e.code
                  and ("field" not in expect or expect["field"] == e.field))
            why = f"raised {e.code} {e.field!r}, expected {expect}"
        except Exception as e:
            ok, why = False, f"raised {e!r}"
        checks.check(name, ok, why)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--intentd", required=True, help="the intentd binary")
    parser.add_argument("--source-dir", required=True, help="the repository's root")
    args = parser.parse_args()
    intentd = os.path.abspath(args.intentd)
    source_dir = os.path.abspath(args.source_dir)
    checks = Checks()

    with open(os.path.join(source_dir, DOC), encoding="utf-8") as f:
        examples, python_blocks = read_examples(f.read())
    checks.check("document: at least 4 worked examples", len(examples) >= 4,
                 f"found {len(examples)}")
    versions = {example["rules_version"] for example, _ in examples}
    checks.check("document: examples of rules versions 1 and 2", versions >= {1, 2},
                 f"versions {sorted(versions)}")
    names = [example.get("name") for example, _ in examples]
    checks.check("document: example names are unique", len(names) == len(set(names)), f"{names}")

    short_ns = reference_ns = None
    for i, block in enumerate(python_blocks):
        label = f"<{DOC} python block {i + 1}>"
        is_reference = re.search(r"^def canonical\(", block, re.M) is not None
        try:
            namespace, printed = exec_block(block, label)
        except Exception as e:
            checks.check(f"{label} runs", False, f"raised {e!r}")
            continue
        if is_reference:
            reference_ns = namespace
        elif "idempotency_key" in namespace:
            short_ns = namespace
            documented_keys = {example["expect"].get("key") for example, _ in examples}
            printed_key = printed.strip()
            checks.check("short Python snippet prints a documented key",
                         printed_key in documented_keys and f"# {printed_key}" in block,
                         f"it prints {printed!r}")
    checks.check("document: short Python snippet found", short_ns is not None,
                 "no ```python block defining idempotency_key() without canonical()")
    checks.check("document: Python reference found", reference_ns is not None,
                 "no ```python block defining canonical()")

    with tempfile.TemporaryDirectory(prefix="intentd-doc-test-") as workdir:
        for example, hmac_input in examples:
            check_example(checks, example, hmac_input, intentd, short_ns, reference_ns, workdir)

    if reference_ns is not None:
        check_vectors(checks, reference_ns, os.path.join(source_dir, VECTORS))

    print(f"{checks.passed} passed, {checks.failed} failed")
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main())
