#!/usr/bin/env python3
"""Keeps docs/protocol.md honest against the agent it describes.

1. Every op of protocol/protocol.h's kOps has a `### `op`` section under
   "## Operations", every error code of its INTENTD_ERROR_CODES has a row
   (first cell `code`) under "## Error codes", every begin decision (the
   store's kDecisions, store/decision.h) and action status is named in
   "## The action state machine"; and the document names
   no op or error code the agent does not have (in those headings and rows,
   and in any "op":"..." or "code":"..." it shows).
2. Every ```session block replays against a fresh private agent: each `> `
   line is sent, each `< ` line must equal the agent's answer once the members
   that vary between runs are masked (the rule is stated in the document,
   "Worked sessions"). A `# wait N s` line sleeps N seconds; other `#` lines
   are comments. The agent must then exit 0 on SIGTERM.

Usage: protocol_doc_test.py --intentd PATH --source-dir DIR [--doc FILE]
                            [--record] [-v]
--record prints the sessions with the agent's actual answers (to update the
document after a deliberate change) and checks nothing else.
Prints `N passed, M failed` last; exits 0 when M is 0, else 1.
Python 3 standard library only.
"""

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

SECRET = b"k" * 40  # the documented test secret: 40 times the letter k
AGENT_START_TIMEOUT_S = 20.0
REPLY_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 15.0
PLACEHOLDERS = ("…", "...")  # "code":"…" in a description of the shape


class Checks:
    def __init__(self, verbose):
        self.verbose = verbose
        self.passed = 0
        self.failures = []

    def ok(self, name):
        self.passed += 1
        if self.verbose:
            print("ok   " + name)

    def fail(self, name, detail=""):
        self.failures.append(name)
        print("FAIL " + name + (":\n     " + detail.replace("\n", "\n     ") if detail else ""))

    def check(self, condition, name, detail=""):
        if condition:
            self.ok(name)
        else:
            self.fail(name, detail)
        return condition


# ---- What the agent has, read from its source --------------------------------

def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def string_literals(text):
    return re.findall(r'"((?:[^"\\]|\\.)*)"', text)


def array_rows(header_text, name):
    """The first string of each row {"...", ...} of the initializer of the
    array `name` (a table whose rows begin with their name)."""
    m = re.search(r"\b" + re.escape(name) + r"(?:\[\])?\s*=\s*\{(.*?)\}\s*;",
                  strip_comments(header_text), re.S)
    if not m:
        raise ValueError("cannot find the initializer of " + name)
    names = re.findall(r'\{\s*"((?:[^"\\]|\\.)*)"', m.group(1))
    if not names:
        raise ValueError(name + " holds no names")
    return names


def function_body(text, signature_regex):
    """The text between the braces of the first definition matching the
    regex (which must end just before the opening brace)."""
    text = strip_comments(text)
    m = re.search(signature_regex + r"\s*\{", text)
    if not m:
        return None
    depth, start = 0, m.end() - 1
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[start + 1:i]
    raise ValueError("unbalanced braces after " + signature_regex)


def op_names(source_dir):
    return array_rows(read(os.path.join(source_dir, "protocol", "protocol.h")), "kOps")


def decision_names(source_dir):
    """The names of kDecisions' rows {Decision::kX, "name"}."""
    text = strip_comments(read(os.path.join(source_dir, "store", "decision.h")))
    m = re.search(r"\bkDecisions\[\]\s*=\s*\{(.*?)\}\s*;", text, re.S)
    if not m:
        raise ValueError("cannot find the initializer of kDecisions in store/decision.h")
    names = re.findall(r'\{\s*Decision::k\w+\s*,\s*"([^"]*)"\s*\}', m.group(1))
    if not names:
        raise ValueError("kDecisions holds no names")
    return names


def error_codes(source_dir):
    """The names of the rows X(kEnumerator, "name") of protocol/protocol.h's
    INTENTD_ERROR_CODES, the list that makes ErrorCode and its names."""
    text = read(os.path.join(source_dir, "protocol", "protocol.h"))
    m = re.search(r"#define\s+INTENTD_ERROR_CODES\(X\)((?:[^\n]*\\\n)*[^\n]*)", text)
    if not m:
        raise ValueError("cannot find #define INTENTD_ERROR_CODES(X) in protocol/protocol.h")
    codes = re.findall(r'\bX\(\s*k\w+\s*,\s*"([^"]*)"\s*\)', m.group(1))
    if not codes:
        raise ValueError("INTENTD_ERROR_CODES holds no codes")
    return codes


def action_statuses(source_dir):
    body = function_body(read(os.path.join(source_dir, "store", "decision.cc")),
                         r"const\s+char\s*\*\s*ActionStatusName\s*\(\s*ActionStatus\s+\w+\s*\)")
    if body is None:
        raise ValueError("cannot find ActionStatusName in store/decision.cc")
    return [s for s in string_literals(body) if s != "unknown"]


# ---- The document's structure ------------------------------------------------

def sections(lines, level):
    """{title: [(line_number, line), ...]} for each heading of `level` '#'."""
    prefix = "#" * level + " "
    out, current = {}, None
    in_fence = False
    for number, line in enumerate(lines, 1):
        if line.startswith("```"):
            in_fence = not in_fence
        if not in_fence and line.startswith(prefix):
            current = line[len(prefix):].strip()
            out[current] = []
            continue
        if not in_fence and re.match(r"#{1,%d} " % (level - 1), line):
            current = None
        if current is not None:
            out[current].append((number, line))
    return out


def find_section(all_sections, title):
    for name, body in all_sections.items():
        if name == title or name.startswith(title):
            return body
    return None


def check_names(doc_lines, source_dir, checks):
    try:
        ops = op_names(source_dir)
        codes = error_codes(source_dir)
        decisions = decision_names(source_dir)
        statuses = action_statuses(source_dir)
    except (OSError, ValueError) as e:
        checks.fail("read the agent's names from " + source_dir, str(e))
        return
    checks.ok("read %d ops, %d error codes, %d decisions, %d statuses from the source"
              % (len(ops), len(codes), len(decisions), len(statuses)))

    top = sections(doc_lines, 2)
    operations = find_section(top, "Operations")
    errors = find_section(top, "Error codes")
    machine = find_section(top, "The action state machine")
    for title, body in (("Operations", operations), ("Error codes", errors),
                        ("The action state machine", machine)):
        checks.check(body is not None, "the document has a '## %s' section" % title)
    operations, errors, machine = operations or [], errors or [], machine or []

    def names_match(lines, pattern, names, has, names_one, source):
        """Every name in `names` has a line matching `pattern`, and no more."""
        found = {}
        for number, line in lines:
            m = re.match(pattern, line)
            if m:
                found.setdefault(m.group(1), number)
        for name in names:
            checks.check(name in found, has.format(name))
        for name, number in sorted(found.items()):
            checks.check(name in names, "line %d: %s" % (number, names_one.format(name)),
                         source + ": " + ", ".join(names))

    names_match(operations, r"### `([^`]+)`\s*$", ops,
                "op `{0}` has a '### `{0}`' section under Operations",
                "section '### `{0}`' names an op the agent has", "kOps")
    names_match(errors, r"\|\s*`([^`]+)`\s*\|", codes,
                "error code `{0}` has a row under Error codes",
                "error row `{0}` is a code the agent sends", "INTENTD_ERROR_CODES")

    machine_text = "\n".join(line for _, line in machine)
    for name in decisions:
        checks.check("`%s`" % name in machine_text,
                     "decision `%s` is named in The action state machine" % name)
    for name in statuses:
        checks.check("`%s`" % name in machine_text,
                     "action status `%s` is named in The action state machine" % name)

    # Whatever the document shows as an op or a code must exist.
    shown_ops, shown_codes = {}, {}
    for number, line in enumerate(doc_lines, 1):
        for m in re.finditer(r'"op"\s*:\s*"([^"]*)"', line):
            shown_ops.setdefault(m.group(1), number)
        for m in re.finditer(r'"code"\s*:\s*"([^"]*)"', line):
            shown_codes.setdefault(m.group(1), number)
    # Sessions may show an unknown op on purpose: the agent answers unknown_op.
    unknown_on_purpose = set()
    for number, line in enumerate(doc_lines, 1):
        if line.startswith("< ") and '"unknown_op"' in line and number >= 2:
            previous = doc_lines[number - 2]
            m = re.search(r'"op"\s*:\s*"([^"]*)"', previous)
            if previous.startswith("> ") and m:
                unknown_on_purpose.add(m.group(1))
    bad = ["%s (line %d)" % (op, n) for op, n in sorted(shown_ops.items())
           if op not in ops and op not in unknown_on_purpose and op not in PLACEHOLDERS]
    checks.check(not bad, "every \"op\" the document shows is an op of the agent "
                 "(or answered unknown_op)", "not ops: " + ", ".join(bad))
    bad = ["%s (line %d)" % (code, n) for code, n in sorted(shown_codes.items())
           if code not in codes and code not in PLACEHOLDERS]
    checks.check(not bad, "every \"code\" the document shows is an error code of the agent",
                 "not codes: " + ", ".join(bad))


# ---- Sessions ----------------------------------------------------------------

class RawNumber:
    """A JSON number with a fraction or exponent, kept as written: the agent
    echoes such an id exactly as sent."""

    def __init__(self, text):
        self.text = text

    def __eq__(self, other):
        return isinstance(other, RawNumber) and other.text == self.text

    def __repr__(self):
        return self.text


def parse_json_line(text):
    return json.loads(text, parse_float=RawNumber)


def mask(value, problems, path=""):
    """The value with its run-dependent members replaced, per the document's
    masking rule: a member whose name ends in `_ms` (any depth) must be an
    integer; the top-level `version` (ping) must be a string; an error's
    `message` must be a non-empty string."""
    if isinstance(value, list):
        return [mask(v, problems, "%s[%d]" % (path, i)) for i, v in enumerate(value)]
    if not isinstance(value, dict):
        return value
    out = {}
    for name, member in value.items():
        where = path + "." + name if path else name
        if name.endswith("_ms"):
            if not (isinstance(member, int) and not isinstance(member, bool)):
                problems.append("%s is %r, not an integer" % (where, member))
            out[name] = "<integer>"
        elif where == "version":
            if not isinstance(member, str):
                problems.append("version is %r, not a string" % (member,))
            out[name] = "<string>"
        elif where == "error.message":
            if not (isinstance(member, str) and member):
                problems.append("error.message is %r, not a non-empty string" % (member,))
            out[name] = "<message>"
        else:
            out[name] = mask(member, problems, where)
    return out


def differences(expected, actual, path=""):
    """Where two masked values differ, as readable lines."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        out = []
        for name in list(expected) + [n for n in actual if n not in expected]:
            where = path + "." + name if path else name
            if name not in actual:
                out.append("%s: missing (expected %s)" % (where, json.dumps(expected[name], default=repr)))
            elif name not in expected:
                out.append("%s: not expected (got %s)" % (where, json.dumps(actual[name], default=repr)))
            else:
                out.extend(differences(expected[name], actual[name], where))
        return out
    if isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        out = []
        for i, (e, a) in enumerate(zip(expected, actual)):
            out.extend(differences(e, a, "%s[%d]" % (path, i)))
        return out
    if expected == actual and type(expected) is type(actual):
        return []
    return ["%s: expected %s, got %s" % (path or "(line)", json.dumps(expected, default=repr),
                                         json.dumps(actual, default=repr))]


def session_blocks(doc_lines):
    """[(title, [(line_number, line), ...])] for each ```session block."""
    blocks, title, current = [], "(no heading)", None
    for number, line in enumerate(doc_lines, 1):
        if current is None:
            if re.match(r"#{1,6} ", line):
                title = line.lstrip("#").strip()
            elif re.match(r"```session\s*$", line):
                current = []
        elif line.startswith("```"):
            blocks.append((title, current))
            current = None
        else:
            current.append((number, line))
    if current is not None:
        blocks.append((title, current))  # unterminated: still replayed
    return blocks


class Agent:
    """A private intentd on a temporary socket and store."""

    def __init__(self, intentd, config, workdir):
        self.workdir = workdir
        self.socket_path = os.path.join(workdir, "s.sock")
        key_file = os.path.join(workdir, "hmac-key")
        fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(SECRET)
        self.log_path = os.path.join(workdir, "agent.log")
        env = dict(os.environ)
        env.pop("CREDENTIALS_DIRECTORY", None)
        env.pop("IDEMPOTENCY_HMAC_KEY", None)
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [intentd, "serve", "--socket", self.socket_path,
             "--data-dir", os.path.join(workdir, "data"), "--config", config,
             "--hmac-key-file", key_file, "--wal-spares", "off", "--min-free-space", "0",
             "--workers", "4", "--log-level", "warning"],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT, env=env)

    def connect(self):
        """The first connection, once the agent listens (no probe before it:
        the session's counters, e.g. stats' connections_total, start at 1)."""
        deadline = time.monotonic() + AGENT_START_TIMEOUT_S
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError("the agent exited with %s at start:\n%s"
                                   % (self.proc.returncode, self.log_text()))
            try:
                return Connection(self.socket_path)
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError("the agent did not listen within %.0f s:\n%s"
                                   % (AGENT_START_TIMEOUT_S, self.log_text()))
            time.sleep(0.05)

    def log_text(self):
        if not self.log.closed:
            self.log.flush()
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")[-4000:]

    def stop(self):
        """SIGTERM; the exit status (None if it had to be killed)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.kill()
                return None
        self.log.close()
        return self.proc.returncode

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if not self.log.closed:
            self.log.close()


class Connection:
    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.sock.settimeout(REPLY_TIMEOUT_S)
            self.sock.connect(path)
        except OSError:
            self.sock.close()
            raise
        self.buffer = b""

    def send(self, data):
        self.sock.sendall(data)

    def read_line(self):
        """One line without its '\\n'; None when the agent closed first."""
        while b"\n" not in self.buffer:
            chunk = self.sock.recv(65536)
            if not chunk:
                return None
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line.decode("utf-8", "replace")

    def close(self):
        self.sock.close()


def replay(title, block, conn, checks, record):
    pending = []  # (line_number, text) sent together before the next `< `
    for number, line in block:
        if line.startswith("> "):
            pending.append((number, line[2:]))
            if record:
                print(line)
            continue
        if line.startswith("< "):
            if pending:
                conn.send(b"".join(text.encode("utf-8") + b"\n" for _, text in pending))
                pending = []
            expected_text = line[2:]
            name = "%s: line %d" % (title, number)
            try:
                actual_text = conn.read_line()
            except socket.timeout:
                actual_text = None
            if record:
                print("< " + (actual_text if actual_text is not None else "(no answer)"))
                continue
            if actual_text is None:
                checks.fail(name, "no answer (connection closed or timed out); expected:\n"
                            + expected_text)
                return
            problems = []
            try:
                expected = mask(parse_json_line(expected_text), problems)
            except ValueError as e:
                checks.fail(name, "the document's line is not JSON: %s" % e)
                continue
            expected_problems, problems = problems, []
            try:
                actual = mask(parse_json_line(actual_text), problems)
            except ValueError as e:
                checks.fail(name, "the agent's answer is not JSON (%s): %s" % (e, actual_text))
                continue
            if expected_problems:
                checks.fail(name, "the document's line breaks the masking rule: "
                            + "; ".join(expected_problems))
            elif problems:
                checks.fail(name, "; ".join(problems) + "\nactual:   " + actual_text)
            else:
                diff = differences(expected, actual)
                checks.check(not diff, name, "\n".join(diff) + "\nexpected: %s\nactual:   %s"
                             % (expected_text, actual_text))
            continue
        m = re.match(r"#\s*wait\s+([0-9.]+)\s*s\s*$", line)
        if m:
            if pending:
                conn.send(b"".join(text.encode("utf-8") + b"\n" for _, text in pending))
                pending = []
            time.sleep(float(m.group(1)))
        if record and line.strip():
            print(line)
        # Other lines ('#' comments, blank lines) are not part of the exchange.
    if pending and not record:
        checks.fail("%s: line %d" % (title, pending[0][0]),
                    "request lines without a `< ` answer line after them")


def check_sessions(doc_lines, intentd, source_dir, checks, record):
    blocks = session_blocks(doc_lines)
    if not record:
        checks.check(len(blocks) > 0, "the document has ```session blocks")
        titles = " ".join(title for title, _ in blocks)
        for decision in ("execute", "in_flight", "recover", "replay"):
            checks.check(any(decision in title for title, _ in blocks),
                         "a session is titled with the decision `%s`" % decision,
                         "session titles: " + titles)
    config = os.path.join(source_dir, "packaging", "config", "intentd.json")
    if not os.path.isfile(intentd) or not os.access(intentd, os.X_OK):
        checks.fail("the agent binary %s is executable" % intentd)
        return
    base = tempfile.gettempdir()
    if len(base) > 60:  # sun_path holds 108 bytes
        base = "/tmp"
    for title, block in blocks:
        if record:
            print("\n### " + title)
        workdir = tempfile.mkdtemp(prefix="intentd-doc-", dir=base)
        agent = None
        try:
            agent = Agent(intentd, config, workdir)
            conn = agent.connect()
            try:
                replay(title, block, conn, checks, record)
            finally:
                conn.close()
            status = agent.stop()
            if not record:
                checks.check(status == 0, "%s: the agent exits 0 on SIGTERM" % title,
                             "exit status %s; log:\n%s" % (status, agent.log_text()))
        except (OSError, RuntimeError) as e:
            checks.fail("%s: run the session" % title, str(e))
        finally:
            if agent is not None:
                agent.kill()
            shutil.rmtree(workdir, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--intentd", required=True, help="the intentd binary")
    parser.add_argument("--source-dir", required=True, help="the source tree")
    parser.add_argument("--doc", help="the document (default: SOURCE_DIR/docs/protocol.md)")
    parser.add_argument("--record", action="store_true",
                        help="print the sessions with the agent's answers; check nothing")
    parser.add_argument("-v", "--verbose", action="store_true", help="print passing checks too")
    args = parser.parse_args()
    intentd = os.path.abspath(args.intentd)
    source_dir = os.path.abspath(args.source_dir)
    doc = os.path.abspath(args.doc or os.path.join(source_dir, "docs", "protocol.md"))
    checks = Checks(args.verbose)
    try:
        doc_lines = read(doc).split("\n")
    except OSError as e:
        checks.fail("read " + doc, str(e))
        doc_lines = None
    if doc_lines is not None:
        if args.record:
            check_sessions(doc_lines, intentd, source_dir, Checks(False), True)
            return 0
        text = "\n".join(doc_lines)
        outside = "../" + "shared"  # split: this file must not match it either
        checks.check(outside not in text,
                     "the document stands alone (no link outside the repository)")
        check_names(doc_lines, source_dir, checks)
        check_sessions(doc_lines, intentd, source_dir, checks, False)
    failed = len(checks.failures)
    print("%d passed, %d failed" % (checks.passed, failed))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
