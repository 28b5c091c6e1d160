#!/usr/bin/env python3
"""Plays systemd's side of sd_notify for the packaging tests: binds a datagram
Unix socket at PATH and appends every message received to LOG, one line per
datagram (its newline-separated assignments joined by spaces), flushed at
once. Exits after STOPPING=1 is followed by the sender's exit, or after
TIMEOUT seconds. Usage: notify_listener.py PATH LOG [TIMEOUT]"""
import os
import socket
import sys
import time


def main():
    path, log = sys.argv[1], sys.argv[2]
    deadline = time.monotonic() + (float(sys.argv[3]) if len(sys.argv) > 3 else 60)
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.bind(path)
        with open(log, "a", encoding="utf-8") as out:
            while time.monotonic() < deadline:
                s.settimeout(max(0.05, deadline - time.monotonic()))
                try:
                    data = s.recv(4096)
                except socket.timeout:
                    break
                out.write(" ".join(data.decode("utf-8", "replace").split("\n")).strip() + "\n")
                out.flush()
    os.unlink(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
