#!/usr/bin/env python3
"""A minimal intentd protocol client for the packaging tests: sends each
argument (one JSON request) on one connection and prints each response line.
Usage: client.py SOCKET REQUEST_JSON..."""
import json
import socket
import sys


def main():
    path, requests = sys.argv[1], sys.argv[2:]
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(10)
        s.connect(path)
        reader = s.makefile("rb")
        for request in requests:
            json.loads(request)  # the test's own request must be valid JSON
            s.sendall(request.encode() + b"\n")
            line = reader.readline()
            if not line.endswith(b"\n"):
                sys.exit("client.py: the agent closed the connection without a full response")
            json.loads(line)  # every response is one JSON object on one line
            sys.stdout.write(line.decode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
