#!/usr/bin/env node
// A WhatsApp Cloud API webhook receiver that hands each message to the bot once.
//
// Node built-ins only. Run it behind your HTTPS reverse proxy (Meta only calls
// https:// URLs):
//
//   WHATSAPP_APP_SECRET_FILE=/etc/bot/app_secret \
//   WHATSAPP_VERIFY_TOKEN_FILE=/etc/bot/verify_token \
//   INTENTD_SOCKET=/run/intentd/intentd.sock INTENTD_TENANT=acme \
//   node clients/node/examples/webhook_receiver.js
//
// Environment:
//   WHATSAPP_APP_SECRET or WHATSAPP_APP_SECRET_FILE   the Meta app's secret (required)
//   WHATSAPP_VERIFY_TOKEN or WHATSAPP_VERIFY_TOKEN_FILE
//                            the token you typed in the webhook settings (required)
//   INTENTD_SOCKET           the agent's socket (default /run/intentd/intentd.sock)
//   INTENTD_TENANT           tenant_id under which message ids are recorded (default "default")
//   WEBHOOK_HOST, WEBHOOK_PORT   where to listen (default 127.0.0.1:8080; port 0 picks one)
//
// GET: Meta's verification handshake (hub.mode=subscribe, hub.verify_token,
// hub.challenge). POST: the signature is checked on the raw body (403 when it
// does not match), 200 is answered at once, then the agent is asked which
// events are first sightings, and those are printed, one JSON line each, on
// stdout (bodies are processed one at a time, in arrival order): replace
// printEvent with your bot.
//
// An event is recorded as seen before the bot handles it: if this process dies
// in between, the redelivery is not first and the event is lost. Meta does not
// redeliver once it got its 200 anyway; persist the body before answering if
// you need more.

import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';

import {
  Client, IntentdError, SIGNATURE_HEADER, firstSightings, messageIds, verifySignature,
} from '../index.js';

const MAX_BODY_BYTES = 4 * 1024 * 1024; // Meta's notifications are at most a few MB

/** $NAME, else the content of the file $NAME_FILE (one trailing newline dropped). */
function setting(name) {
  let value = process.env[name];
  const file = process.env[`${name}_FILE`];
  if (!value && file) value = fs.readFileSync(file, 'utf8').replace(/\n$/, '');
  if (!value) {
    console.error(`webhook_receiver: set ${name} or ${name}_FILE`);
    process.exit(1);
  }
  return value;
}

/** The bot goes here: called once per first sighting. */
function printEvent(tenantId, event) {
  process.stdout.write(`${JSON.stringify({
    tenant_id: tenantId, kind: event.kind, id: event.id, key: event.key, status: event.status,
    phone_number_id: event.metadata.phone_number_id ?? null, item: event.item,
  })}\n`);
}

const appSecret = setting('WHATSAPP_APP_SECRET');
const verifyToken = setting('WHATSAPP_VERIFY_TOKEN');
const tenantId = process.env.INTENTD_TENANT || 'default';
const host = process.env.WEBHOOK_HOST || '127.0.0.1';
const port = Number(process.env.WEBHOOK_PORT || 8080);
const client = new Client(); // socket: $INTENTD_SOCKET

async function processBody(raw) {
  let body;
  let events;
  try {
    body = JSON.parse(raw.toString('utf8'));
    events = await firstSightings(client, tenantId, body);
  } catch (err) {
    if (!(err instanceof IntentdError)) {
      console.error(`webhook_receiver: signed body is not a webhook object: ${err.message}`);
      return;
    }
    // Unknown which events the agent recorded: they are not handled.
    events = err.firstSightings ?? [];
    const handled = new Set(events.map((e) => e.key));
    const unknown = messageIds(body).map((e) => e.key).filter((k) => !handled.has(k));
    console.error(`webhook_receiver: seen failed (${err.code}: ${err.message}); `
      + `not handled: ${JSON.stringify(unknown)}`);
  }
  for (const event of events) printEvent(tenantId, event);
}

// Bodies are processed one after the other, after their 200 was sent.
let backlog = Promise.resolve();

function reply(res, code, text) {
  res.writeHead(code, { 'Content-Type': 'text/plain; charset=utf-8' });
  res.end(text);
}

function sameToken(a, b) {
  const x = Buffer.from(a, 'utf8');
  const y = Buffer.from(b, 'utf8');
  return x.length === y.length && crypto.timingSafeEqual(x, y);
}

const server = http.createServer((req, res) => {
  const url = new URL(req.url, 'http://localhost');
  if (req.method === 'GET') {
    const q = url.searchParams;
    const challenge = q.get('hub.challenge');
    if (q.get('hub.mode') === 'subscribe' && challenge !== null
        && sameToken(q.get('hub.verify_token') ?? '', verifyToken)) {
      reply(res, 200, challenge);
    } else {
      reply(res, 403, 'forbidden');
    }
    return;
  }
  if (req.method !== 'POST') {
    reply(res, 405, 'method not allowed');
    return;
  }
  const chunks = [];
  let size = 0;
  req.on('data', (chunk) => {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) {
      if (!res.headersSent) reply(res, 413, 'body too large');
      req.destroy();
      return;
    }
    chunks.push(chunk);
  });
  req.on('end', () => {
    if (size > MAX_BODY_BYTES) return;
    const raw = Buffer.concat(chunks);
    if (!verifySignature(appSecret, raw, req.headers[SIGNATURE_HEADER])) {
      reply(res, 403, 'bad signature');
      return;
    }
    reply(res, 200, 'ok');
    backlog = backlog.then(() => processBody(raw)).catch((err) => {
      console.error(`webhook_receiver: ${err.stack || err}`);
    });
  });
});

server.listen(port, host, () => {
  console.error(`webhook_receiver: listening on http://${host}:${server.address().port}/ `
    + `(tenant ${tenantId}, agent ${client.socketPath})`);
});

for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    server.close();
    backlog.finally(() => {
      client.close();
      process.exit(0);
    });
  });
}
