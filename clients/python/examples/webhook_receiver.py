#!/usr/bin/env python3
"""A WhatsApp Cloud API webhook receiver that hands each message to the bot once.

Standard library only. Run it behind your HTTPS reverse proxy (Meta only
calls https:// URLs):

    WHATSAPP_APP_SECRET_FILE=/etc/bot/app_secret \\
    WHATSAPP_VERIFY_TOKEN_FILE=/etc/bot/verify_token \\
    INTENTD_SOCKET=/run/intentd/intentd.sock INTENTD_TENANT=acme \\
    python3 clients/python/examples/webhook_receiver.py

Environment:
  WHATSAPP_APP_SECRET or WHATSAPP_APP_SECRET_FILE   the Meta app's secret (required)
  WHATSAPP_VERIFY_TOKEN or WHATSAPP_VERIFY_TOKEN_FILE
                                the token you typed in the webhook settings (required)
  INTENTD_SOCKET                the agent's socket (default /run/intentd/intentd.sock)
  INTENTD_TENANT                tenant_id under which message ids are recorded
                                (default "default")
  WEBHOOK_HOST, WEBHOOK_PORT    where to listen (default 127.0.0.1:8080; port 0 picks one)

GET: Meta's verification handshake (hub.mode=subscribe, hub.verify_token,
hub.challenge). POST: the signature is checked on the raw body (403 when it
does not match), 200 is answered at once, and a background thread asks the
agent which events are first sightings and prints those, one JSON line each,
on stdout: replace print_event with your bot.

An event is recorded as seen before the bot handles it: if this process dies
in between, the redelivery is not first and the event is lost. Meta does not
redeliver once it got its 200 anyway; persist the body before answering if
you need more.
"""

from __future__ import annotations

import hmac
import json
import os
import queue
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from intentd_client import Client, IntentdError  # noqa: E402
from intentd_client.webhook import (SIGNATURE_HEADER, first_sightings,  # noqa: E402
                                    message_ids, verify_signature)

MAX_BODY_BYTES = 4 * 1024 * 1024  # Meta's notifications are at most a few MB


def setting(name: str) -> str:
    """$NAME, else the content of the file $NAME_FILE (one trailing newline dropped)."""
    value = os.environ.get(name)
    path = os.environ.get(name + "_FILE")
    if not value and path:
        with open(path, encoding="utf-8") as f:
            value = f.read()
        if value.endswith("\n"):
            value = value[:-1]
    if not value:
        sys.exit(f"webhook_receiver: set {name} or {name}_FILE")
    return value


def print_event(tenant_id: str, event) -> None:
    """The bot goes here: called once per first sighting."""
    print(json.dumps({"tenant_id": tenant_id, "kind": event.kind, "id": event.id,
                      "key": event.key, "status": event.status,
                      "phone_number_id": event.metadata.get("phone_number_id"),
                      "item": event.item}, ensure_ascii=False), flush=True)


class Worker(threading.Thread):
    """Processes the accepted bodies one at a time, after the 200 is sent."""

    def __init__(self, client: Client, tenant_id: str):
        super().__init__(name="webhook-worker", daemon=True)
        self.client = client
        self.tenant_id = tenant_id
        self.bodies: "queue.Queue[bytes]" = queue.Queue()

    def run(self) -> None:
        while True:
            self.process(self.bodies.get())

    def process(self, raw: bytes) -> None:
        try:
            body = json.loads(raw)
            events = first_sightings(self.client, self.tenant_id, body)
        except (ValueError, TypeError) as e:
            print(f"webhook_receiver: signed body is not a webhook object: {e}",
                  file=sys.stderr, flush=True)
            return
        except IntentdError as e:
            # Unknown which events the agent recorded: they are not handled.
            done = getattr(e, "first_sightings", [])
            handled = {ev.key for ev in done}
            unknown = [ev.key for ev in message_ids(body) if ev.key not in handled]
            print(f"webhook_receiver: seen failed ({e}); not handled: {unknown}",
                  file=sys.stderr, flush=True)
            events = done
        for event in events:
            print_event(self.tenant_id, event)


def make_handler(app_secret: str, verify_token: str, worker: Worker):
    class Handler(BaseHTTPRequestHandler):
        server_version = "intentd-webhook-example"

        def reply(self, code: int, text: str = "") -> None:
            data = text.encode("utf-8")
            self.send_response(code)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()

        def do_GET(self) -> None:
            q = parse_qs(urlsplit(self.path).query)
            mode = q.get("hub.mode", [""])[0]
            token = q.get("hub.verify_token", [""])[0]
            challenge = q.get("hub.challenge", [None])[0]
            if (mode == "subscribe" and challenge is not None
                    and hmac.compare_digest(token.encode("utf-8"),
                                            verify_token.encode("utf-8"))):
                self.reply(200, challenge)
            else:
                self.reply(403, "forbidden")

        def do_POST(self) -> None:
            try:
                length = int(self.headers.get("Content-Length", ""))
            except ValueError:
                self.reply(411, "Content-Length required")
                return
            if not 0 <= length <= MAX_BODY_BYTES:
                self.reply(413, "body too large")
                self.close_connection = True
                return
            raw = self.rfile.read(length)
            if not verify_signature(app_secret, raw, self.headers.get(SIGNATURE_HEADER)):
                self.reply(403, "bad signature")
                return
            self.reply(200, "ok")
            worker.bodies.put(raw)

    return Handler


def main() -> None:
    app_secret = setting("WHATSAPP_APP_SECRET")
    verify_token = setting("WHATSAPP_VERIFY_TOKEN")
    tenant_id = os.environ.get("INTENTD_TENANT") or "default"
    host = os.environ.get("WEBHOOK_HOST") or "127.0.0.1"
    port = int(os.environ.get("WEBHOOK_PORT") or 8080)
    worker = Worker(Client(), tenant_id)  # socket: $INTENTD_SOCKET
    worker.start()
    server = ThreadingHTTPServer((host, port), make_handler(app_secret, verify_token, worker))
    server.daemon_threads = True
    print(f"webhook_receiver: listening on http://{host}:{server.server_address[1]}/ "
          f"(tenant {tenant_id}, agent {worker.client.socket_path})",
          file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
