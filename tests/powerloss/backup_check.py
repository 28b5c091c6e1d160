#!/usr/bin/env python3
"""A backup survives a power cut: every write acknowledged before it began.

    backup_check.py --intentd PATH --plfs PATH [--rounds N] [--seed S] [--self-test]

Per round, on a fresh power-loss mount (intentd_plfs): the agent runs on
MNT/data; a batch of intents is acknowledged (begin, and complete for half
of them); a `backup` into MNT/backups/bN is taken and answered; more writes
follow (never in the backup's promise); then the agent is SIGKILLed and the
power cut (the unsynced state dropped). The backup directory is then
restored with `intentd restore` into a directory off the mount, an agent is
started on it, and every intent acknowledged before the backup began must
be there with its key, and every acknowledged completion must replay its
response. The cut mode cycles through plain, keep-prefix and torn.

--self-test also expects the writes made after the backup; a round then
passes only when the check reports them missing (the check can fail).

Prints one line per round and `N passed, M failed` last (rounds); exit 0
only when every round held. Needs root and /dev/fuse (exit 77 otherwise,
with the reason).
"""
import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SECRET = "k" * 40
PAYLOAD = {"cliente_id": "c-1", "valor": "10.00", "chave_pix_destino": "529.982.247-25"}


HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "clients", "python"))
from intentd_client import Client, IntentdError  # noqa: E402  (the shipped client)


class Agent:
    """One `intentd serve`, talked to through the shipped Python client (which
    also waits, with backoff, for the agent to start listening)."""

    def __init__(self, intentd, data_dir, sock, key_file, log):
        self.proc = subprocess.Popen(
            [intentd, "serve", "--socket", sock, "--data-dir", data_dir,
             "--hmac-key-file", key_file, "--log-level", "warning"],
            stdout=subprocess.DEVNULL, stderr=log)
        self.client = Client(sock, reconnect_timeout=30)
        try:
            self.client.ping()
        except IntentdError as e:
            raise RuntimeError(f"the agent did not start on {data_dir}: {e}") from None

    def kill(self):
        self.client.close()
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        self.client.close()
        self.proc.terminate()
        self.proc.wait(timeout=30)


def fsync_dir(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def begin(agent, ref):
    return agent.client.begin("acme", ref, "pix.cobranca", PAYLOAD)


def write_batch(agent, prefix, count, acknowledged):
    """Begins `count` intents, completes every other one; records what was acknowledged."""
    for i in range(count):
        ref = f"{prefix}-{i}"
        r = begin(agent, ref)  # an error answer raises
        if r.get("decision") != "execute":
            raise RuntimeError(f"begin {ref}: {r}")
        entry = {"key": r["key"], "response": None}
        acknowledged[ref] = entry
        if i % 2 == 0:
            response = {"provider_id": f"ch-{ref}"}
            agent.client.complete("acme", r["key"], r["lease_token"], response)
            entry["response"] = response


def check_restored(agent, acknowledged):
    """The problems found: acknowledged intents missing or changed in the restored store."""
    problems = []
    for ref, want in acknowledged.items():
        r = agent.client.lookup("acme", ref, "pix.cobranca")
        if not r.get("found"):
            problems.append(f"{ref}: acknowledged before the backup, missing after restore: {r}")
            continue
        if r.get("key") != want["key"]:
            problems.append(f"{ref}: key {r.get('key')} after restore, {want['key']} acknowledged")
            continue
        if want["response"] is not None:
            b = begin(agent, ref)
            if b.get("decision") != "replay" or b.get("response") != want["response"]:
                problems.append(f"{ref}: acknowledged completion does not replay: {b}")
    return problems


def run_round(args, n, mode, workdir):
    backing, mnt = os.path.join(workdir, "backing"), os.path.join(workdir, "mnt")
    control = os.path.join(workdir, "plfs.sock")
    os.makedirs(backing)
    os.makedirs(mnt)
    key_file = os.path.join(workdir, "key")
    with open(key_file, "w") as f:
        f.write(SECRET)
    os.chmod(key_file, 0o600)
    log = open(os.path.join(workdir, "log"), "ab")
    fs = subprocess.Popen([args.plfs, backing, mnt, "--control", control, "-f", "-s"],
                          stdout=log, stderr=log)
    try:
        deadline = time.time() + 20
        while not os.path.ismount(mnt):
            if fs.poll() is not None or time.time() > deadline:
                raise RuntimeError("intentd_plfs did not mount")
            time.sleep(0.05)
        for d in ("data", "backups"):
            os.mkdir(os.path.join(mnt, d))
        fsync_dir(mnt)  # RocksDB never syncs its directory's parent
        agent = Agent(args.intentd, os.path.join(mnt, "data"), os.path.join(workdir, "a.sock"),
                      key_file, log)
        acknowledged = {}
        write_batch(agent, f"r{n}-before", 60, acknowledged)
        dest = os.path.join(mnt, "backups", f"b{n}")
        agent.client.request("backup", dest=dest)
        # Not in the backup's promise; --self-test expects them too, and the
        # check must then find them missing.
        write_batch(agent, f"r{n}-after", 30, acknowledged if args.self_test else {})
        agent.kill()
        cut = ["cut"] if mode == "plain" else ["cut", mode, str(args.seed + n)]
        out = subprocess.run([args.plfs, "ctl", control] + cut, capture_output=True, text=True)
        if out.returncode != 0 or not out.stdout.startswith("ok"):
            raise RuntimeError(f"cut: {out.stdout}{out.stderr}")
        restored = os.path.join(workdir, "restored")
        r = subprocess.run([args.intentd, "restore", dest, "--data-dir", restored],
                           capture_output=True, text=True)
        if r.returncode != 0:
            return [f"restore of the backup failed after the cut: {r.stderr.strip()}"]
        agent = Agent(args.intentd, restored, os.path.join(workdir, "b.sock"), key_file, log)
        try:
            return check_restored(agent, acknowledged)
        finally:
            agent.stop()
    finally:
        subprocess.run(["fusermount3", "-u", mnt], capture_output=True)
        if fs.poll() is None:
            subprocess.run(["fusermount3", "-u", "-z", mnt], capture_output=True)
        fs.wait(timeout=20)
        log.close()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--intentd", required=True)
    p.add_argument("--plfs", required=True)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--self-test", action="store_true",
                   help="also expect the writes made after the backup: every round must fail")
    args = p.parse_args()
    if os.geteuid() != 0 or not os.path.exists("/dev/fuse") or not shutil.which("fusermount3"):
        print("backup_check: SKIPPED: needs root, /dev/fuse and fusermount3")
        return 77
    random.seed(args.seed)
    modes = ["plain", "keep-prefix", "torn"]
    passed = failed = 0
    for n in range(args.rounds):
        mode = modes[n % len(modes)]
        workdir = tempfile.mkdtemp(prefix="intentd-backup-cut.")
        try:
            problems = run_round(args, n, mode, workdir)
        except Exception as e:  # a broken round is a failure, reported as such
            problems = [f"round error: {e}"]
        if args.self_test:
            missing = [x for x in problems if "missing after restore" in x]
            problems = [] if missing else ["self-test: the writes made after the backup were "
                                           "not reported missing"] + problems
        if problems:
            failed += 1
            print(f"FAILED: round {n} (cut {mode}):")
            for line in problems[:10]:
                print(f"  {line}")
            print(f"  (kept {workdir})")
        else:
            passed += 1
            what = ("the writes made after the backup were reported missing" if args.self_test
                    else "the backup restored every write acknowledged before it began")
            print(f"ok: round {n} (cut {mode}): {what}")
            shutil.rmtree(workdir, ignore_errors=True)
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
