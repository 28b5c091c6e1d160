"""Starts `intentd serve` for the demo on a temporary socket and data dir."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from typing import Optional


class Agent:
    def __init__(self, binary: str):
        if not os.access(binary, os.X_OK):
            raise SystemExit(f"run.py: {binary} is not an executable intentd")
        self.binary = binary
        self.dir = tempfile.mkdtemp(prefix="intentd-demo-")
        self.socket = os.path.join(self.dir, "intentd.sock")
        self.config = os.path.join(self.dir, "intentd.json")
        self.proc = None

    def start(self, config: Optional[dict] = None) -> "Agent":
        """config: the agent's config file (also what `intentd reconcile
        --config` reads); empty by default: the built-in action types."""
        with open(self.config, "w") as f:
            json.dump(config or {}, f, indent=2)
            f.write("\n")
        # The demo's own secret: at least 32 bytes, never a real one.
        env = dict(os.environ, IDEMPOTENCY_HMAC_KEY="demo-secret-" + "x" * 32)
        self.log = open(os.path.join(self.dir, "agent.log"), "wb")
        self.proc = subprocess.Popen(
            [self.binary, "serve", "--socket", self.socket, "--data-dir",
             os.path.join(self.dir, "data"), "--config", self.config],
            env=env, stdout=self.log, stderr=self.log, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"run.py: intentd exited with {self.proc.returncode}; "
                                 f"see {self.dir}/agent.log")
            try:
                with socket.socket(socket.AF_UNIX) as s:
                    s.connect(self.socket)
                    return self
            except OSError:
                time.sleep(0.02)
        raise SystemExit("run.py: intentd did not start within 15 s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)
