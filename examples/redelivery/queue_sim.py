"""An at-least-once queue feeding long-lived bot processes (consumers).

Each consumer is a `bot.py` process reading one delivery per line on stdin
and answering "ack" or "nack" on stdout. A message is redelivered when its
consumer dies (SIGKILL: a fresh consumer takes the dead one's place), when it
nacks, or when it is not acked within the visibility timeout — then the first
consumer is still working, and a second one gets the same message at once,
as with SQS, Pub/Sub or a webhook retry.
"""

from __future__ import annotations

import collections
import json
import os
import queue as queue_mod
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Deque, Dict, List, Optional

T0 = time.monotonic()


@dataclass
class QueueStats:
    deliveries: int = 0
    redeliveries: int = 0
    consumers_died: int = 0
    nacked: int = 0
    twins: int = 0  # redelivered while the first consumer still ran
    acked: int = 0
    per_message: Dict[str, int] = field(default_factory=dict)


class _Consumer:
    def __init__(self, cmd: List[str], events: "queue_mod.Queue"):
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=None, text=True, bufsize=1)
        self.ready = False
        self.message: Optional[dict] = None
        self.started = 0.0
        self.twinned = False
        threading.Thread(target=self._read, args=(events,), daemon=True).start()

    def _read(self, events: "queue_mod.Queue") -> None:
        for line in self.proc.stdout:
            events.put((self, line.strip()))
        events.put((self, None))  # EOF: the process is gone

    def give(self, message: dict, number: int) -> None:
        self.message, self.started, self.twinned = message, time.monotonic(), False
        try:
            self.proc.stdin.write(json.dumps({"message": message, "delivery": number}) + "\n")
            self.proc.stdin.flush()
        except OSError:
            pass  # it just died: its EOF event requeues the message


class Queue:
    def __init__(self, messages: List[dict], bot_cmd: List[str], consumers: int,
                 visibility_timeout: float, max_deliveries: int, nack_delay: float = 0.2):
        self.pending: Deque[tuple] = collections.deque((m, 0.0) for m in messages)
        self.bot_cmd = bot_cmd
        self.size = consumers
        self.visibility_timeout = visibility_timeout
        self.max_deliveries = max_deliveries
        self.nack_delay = nack_delay
        self.events: "queue_mod.Queue" = queue_mod.Queue()
        self.consumers: List[_Consumer] = []
        self.done: set = set()
        self.gave_up: set = set()
        self.stats = QueueStats()

    def _requeue(self, message: dict, delay: float = 0.0) -> None:
        ref = message["id"]
        if ref in self.done:
            return
        if self.stats.per_message.get(ref, 0) >= self.max_deliveries:
            self.gave_up.add(ref)  # a dead-letter queue would take it
            return
        self.pending.append((message, time.monotonic() + delay))

    def _next_ready_message(self, now: float) -> Optional[dict]:
        for _ in range(len(self.pending)):
            message, not_before = self.pending.popleft()
            if message["id"] in self.done:
                continue
            if not_before <= now:
                return message
            self.pending.append((message, not_before))
        return None

    def _handle(self, c: _Consumer, line: Optional[str]) -> None:
        if os.environ.get("DEMO_TRACE"):
            sys.stderr.write(f"{time.monotonic() - T0:6.2f} {self.bot_cmd[4]:8} pid {c.proc.pid} "
                             f"{line} {c.message and c.message['id']}\n")
        if line == "ready":
            c.ready = True
            return
        message, twinned = c.message, c.twinned
        c.message = None
        if line is None:  # died, by SIGKILL from the chaos plan
            c.proc.wait()
            self.consumers.remove(c)
            self.stats.consumers_died += 1
            if message is not None and not twinned:
                self._requeue(message)
            return
        if message is None:
            return
        if line == "ack":
            self.stats.acked += 1
            self.done.add(message["id"])
        else:
            self.stats.nacked += 1
            if not twinned:
                self._requeue(message, self.nack_delay)

    def run(self, deadline: float) -> QueueStats:
        def busy() -> bool:
            return any(c.message is not None for c in self.consumers)
        while (self.pending or busy()) and time.monotonic() < deadline:
            while len(self.consumers) < self.size:
                self.consumers.append(_Consumer(self.bot_cmd, self.events))
            try:
                c, line = self.events.get(timeout=0.01)
                self._handle(c, line)
                continue  # drain events before handing out work
            except queue_mod.Empty:
                pass
            now = time.monotonic()
            for c in self.consumers:
                if c.message is not None and not c.twinned and \
                        now - c.started > self.visibility_timeout:
                    c.twinned = True
                    self._requeue(c.message)
            for c in self.consumers:
                if c.ready and c.message is None:
                    message = self._next_ready_message(now)
                    if message is None:
                        break
                    ref = message["id"]
                    n = self.stats.per_message.get(ref, 0) + 1
                    self.stats.per_message[ref] = n
                    self.stats.deliveries += 1
                    self.stats.redeliveries += n > 1
                    self.stats.twins += any(o.message is not None and
                                            o.message["id"] == ref
                                            for o in self.consumers)
                    c.give(message, n)
        self.close()
        return self.stats

    def close(self) -> None:
        for c in self.consumers:
            try:
                c.proc.stdin.close()
            except OSError:
                pass
        for c in self.consumers:
            try:
                c.proc.wait(5)
            except subprocess.TimeoutExpired:
                c.proc.kill()
                c.proc.wait()
        self.consumers = []


def bot_command(bot_path: str, mode: str, world_url: str,
                socket_path: Optional[str]) -> List[str]:
    # -S: the bots need nothing outside the standard library, and skipping
    # site-packages hooks makes a replacement consumer start sooner.
    cmd = [sys.executable, "-S", bot_path, "--mode", mode, "--world", world_url]
    if socket_path:
        cmd += ["--socket", socket_path]
    return cmd
