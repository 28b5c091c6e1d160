"""Starts a real `intentd serve` on a temporary socket and data dir.

The binary is $INTENTD_BINARY (ctest sets it), else build*/agent/intentd
under the repository. Without one the tests are skipped, loudly.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest
from typing import List, Optional

HMAC_KEY = "k" * 40
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def find_binary() -> str:
    env = os.environ.get("INTENTD_BINARY")
    if env:
        if not os.access(env, os.X_OK):
            raise RuntimeError(f"INTENTD_BINARY={env} is not an executable")
        return env
    found = sorted((p for p in glob.glob(os.path.join(REPO, "build*", "agent", "intentd"))
                    if os.access(p, os.X_OK)), key=os.path.getmtime, reverse=True)
    if not found:
        raise unittest.SkipTest("no intentd binary: set INTENTD_BINARY or build the agent")
    return found[0]


class AgentProcess:
    """One agent. start() waits until it answers ping; stop() sends SIGTERM."""

    def __init__(self, extra_args: Optional[List[str]] = None):
        self.binary = find_binary()
        self.dir = tempfile.mkdtemp(prefix="intentd-py-")
        self.socket = os.path.join(self.dir, "intentd.sock")
        self.data_dir = os.path.join(self.dir, "data")
        self.config = os.path.join(self.dir, "intentd.json")
        with open(self.config, "w") as f:
            f.write("{}\n")
        self.extra_args = list(extra_args or [])
        self.proc: Optional[subprocess.Popen] = None
        self.log_path = os.path.join(self.dir, "agent.log")

    def start(self, timeout: float = 15.0) -> "AgentProcess":
        env = dict(os.environ, IDEMPOTENCY_HMAC_KEY=HMAC_KEY)
        env.pop("LISTEN_FDS", None)
        env.pop("NOTIFY_SOCKET", None)
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [self.binary, "serve", "--socket", self.socket, "--data-dir", self.data_dir,
             "--config", self.config] + self.extra_args,
            env=env, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"intentd exited with {self.proc.returncode}: {self.log()}")
            if self._answers_ping():
                return self
            time.sleep(0.02)
        self.kill()
        raise RuntimeError(f"intentd did not answer within {timeout} s: {self.log()}")

    def _answers_ping(self) -> bool:
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(1.0)
                s.connect(self.socket)
                s.sendall(b'{"op":"ping","id":0}\n')
                return b'"ok":true' in s.recv(4096)
        except OSError:
            return False

    def log(self) -> str:
        try:
            with open(self.log_path, "rb") as f:
                return f.read()[-4000:].decode("utf-8", "replace")
        except OSError:
            return ""

    def stop(self, timeout: float = 5.0) -> int:
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise RuntimeError("intentd did not exit within 5 s of SIGTERM")
        rc = self.proc.returncode
        self.proc = None
        return rc

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def cleanup(self) -> None:
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


def raw_exchange(socket_path: str, data: bytes, timeout: float = 5.0) -> bytes:
    """Sends bytes as they are and returns everything read until one newline."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(socket_path)
        s.sendall(data)
        buf = b""
        while b"\n" not in buf:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
        return buf
