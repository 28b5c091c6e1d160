// WhatsApp webhook helpers and the seen op, offline.
//
// The agent's seen op is being designed: until it exists, seen, seenBatch and
// firstSightings run against fakeSeenAgent below, a tiny Unix-socket server
// that answers per the op's contract. The signature check, the extraction
// and the example receiver need no agent at all.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, describe, test } from 'node:test';

import * as ic from '../index.js';
import { seenChunks } from '../src/webhook.js';

const EXAMPLE = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'examples',
  'webhook_receiver.js');

// The test vector GitHub documents for X-Hub-Signature-256 (same scheme as
// Meta's: "sha256=" + hex HMAC-SHA256 of the raw body), docs.github.com,
// "Validating webhook deliveries", section "Testing the webhook payload
// validation" (github/docs: content/webhooks/using-webhooks/
// validating-webhook-deliveries.md). Checked independently with
//   printf '%s' 'Hello, World!' | openssl dgst -sha256 -hmac "It's a Secret to Everybody"
const GITHUB_SECRET = "It's a Secret to Everybody";
const GITHUB_PAYLOAD = Buffer.from('Hello, World!');
const GITHUB_SIGNATURE = 'sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17';

const W1 = 'wamid.HBgLMTY1MDU1NTEyMzQVAgASGBQzQTRBNjU5OUFFRTAzODEwMTQ0RgA=';
const W2 = 'wamid.HBgNNTUxMTk4NzY1NDMyMRUCABIYFDNBMkM2NjE5QjQ1RTBFQTk0N0Q4AA==';
const W3 = 'wamid.HBgNNTUyMTk5ODc2NTQzMhUCABIYFjNFQjBDNzU2MkI3RjE2NjBBODQzQTEA';
const OUT1 = 'wamid.HBgLMTY1MDU1NTEyMzQVAgARGBI5QTNDQTVCM0Q0Q0Q2RTY3RTcA';
const OUT2 = 'wamid.HBgNNTUyMTk5ODc2NTQzMhUCABEYEjQ1NjdBQkNERUYwMTIzNDU2AA==';

// Two business accounts in one delivery, as the Cloud API sends them: inbound
// messages with their contacts, statuses of sent messages (two statuses of
// one message), and a change of another field.
const BODY = {
  object: 'whatsapp_business_account',
  entry: [
    {
      id: '102290129340398',
      changes: [
        {
          field: 'messages',
          value: {
            messaging_product: 'whatsapp',
            metadata: { display_phone_number: '15550783881', phone_number_id: '106540352242922' },
            contacts: [{ profile: { name: 'Sheena Nelson' }, wa_id: '16505551234' },
              { profile: { name: 'Ana Souza' }, wa_id: '5511987654321' }],
            messages: [
              {
                from: '16505551234', id: W1, timestamp: '1749416383', type: 'text',
                text: { body: 'Quero pagar a fatura FAT-2026-000123' },
              },
              {
                from: '5511987654321', id: W2, timestamp: '1749416390', type: 'image',
                image: { mime_type: 'image/jpeg', id: '1003383421387256' },
              }],
          },
        },
        {
          field: 'messages',
          value: {
            messaging_product: 'whatsapp',
            metadata: { display_phone_number: '15550783881', phone_number_id: '106540352242922' },
            statuses: [
              {
                id: OUT1, status: 'sent', timestamp: '1749416400', recipient_id: '16505551234',
                conversation: { id: 'a75d17ad06104c51166f948319b03c6a', origin: { type: 'service' } },
                pricing: { billable: true, pricing_model: 'CBP', category: 'service' },
              },
              { id: OUT1, status: 'delivered', timestamp: '1749416401', recipient_id: '16505551234' }],
          },
        }],
    },
    {
      id: '110200345501442',
      changes: [
        {
          field: 'message_template_status_update',
          value: {
            event: 'APPROVED', message_template_id: 1234567890,
            message_template_name: 'fatura_vencida', reason: null,
          },
        },
        {
          field: 'messages',
          value: {
            messaging_product: 'whatsapp',
            metadata: { display_phone_number: '5511940001234', phone_number_id: '116829341022093' },
            contacts: [{ profile: { name: 'Carlos Lima' }, wa_id: '5521998765432' }],
            messages: [{
              from: '5521998765432', id: W3, timestamp: '1749416410', type: 'interactive',
              context: { from: '5511940001234', id: OUT2 },
              interactive: { type: 'button_reply', button_reply: { id: 'pay-now', title: 'Pagar' } },
            }],
            statuses: [
              { id: OUT2, status: 'read', timestamp: '1749416405', recipient_id: '5521998765432' }],
          },
        }],
    }],
};

const BODY_KEYS = [['message', W1], ['message', W2], ['status', `${OUT1}:sent`],
  ['status', `${OUT1}:delivered`], ['message', W3], ['status', `${OUT2}:read`]];

const sign = (secret, raw) => `sha256=${crypto.createHmac('sha256', secret).update(raw).digest('hex')}`;
const clone = (v) => JSON.parse(JSON.stringify(v));
const kindsAndKeys = (events) => events.map((e) => [e.kind, e.key]);

function bodyWithMessages(ids) {
  return {
    object: 'whatsapp_business_account',
    entry: [{
      id: '1',
      changes: [{
        field: 'messages',
        value: {
          messaging_product: 'whatsapp',
          messages: ids.map((id) => ({ from: '5511987654321', id, type: 'text', text: { body: 'oi' } })),
        },
      }],
    }],
  };
}

const servers = [];
const dirs = [];
const clients = [];
after(() => {
  clients.forEach((c) => c.close());
  servers.forEach((s) => s.close());
  dirs.forEach((d) => fs.rmSync(d, { recursive: true, force: true }));
});

function tmpdir(prefix) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  dirs.push(dir);
  return dir;
}

function errorAnswer(code, message, field) {
  return { ok: false, error: field ? { code, message, field } : { code, message } };
}

// Answers seen per its contract from an in-memory store. script(req, n) may
// override an answer: a string to send, '' to hang up, null for the contract's.
function fakeSeenAgent(script = null) {
  const socketPath = path.join(tmpdir('intentd-fake-seen-'), 'fake.sock');
  const requests = [];
  const lineSizes = [];
  const store = new Map();
  let nowMs = 1764700000000;

  function record(tenant, channel, messageId, meta) {
    nowMs += 1;
    const key = JSON.stringify([tenant, channel, messageId]);
    const rec = store.get(key);
    if (!rec) {
      store.set(key, { first_seen_at_ms: nowMs, count: 1, meta: meta ?? null });
      return { first: true };
    }
    rec.count += 1;
    const out = { first: false, first_seen_at_ms: rec.first_seen_at_ms, count: rec.count };
    if (rec.meta !== null) out.meta = rec.meta;
    return out;
  }

  function answer(req) {
    if (req.op !== 'seen') return errorAnswer('unknown_op', `unknown op "${req.op}"`, 'op');
    for (const name of ['tenant_id', 'channel']) {
      if (typeof req[name] !== 'string' || req[name] === '') {
        return errorAnswer('missing_field', `${name} is required`, name);
      }
    }
    if ('messages' in req) {
      if ('message_id' in req) return errorAnswer('bad_request', 'message_id or messages', 'messages');
      const msgs = req.messages;
      if (!Array.isArray(msgs) || msgs.length < 1 || msgs.length > 1000) {
        return errorAnswer('invalid_field', 'messages must hold 1 to 1000 entries', 'messages');
      }
      if (!msgs.every((m) => m && typeof m.message_id === 'string')) {
        return errorAnswer('invalid_field', 'each message needs a message_id', 'messages');
      }
      return {
        ok: true,
        results: msgs.map((m) => ({
          message_id: m.message_id, ...record(req.tenant_id, req.channel, m.message_id, m.meta),
        })),
      };
    }
    if (typeof req.message_id !== 'string') {
      return errorAnswer('missing_field', 'message_id is required', 'message_id');
    }
    return { ok: true, ...record(req.tenant_id, req.channel, req.message_id, req.meta) };
  }

  const server = net.createServer((conn) => {
    let buf = '';
    conn.setEncoding('utf8');
    conn.on('data', (d) => {
      buf += d;
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        const req = JSON.parse(line);
        requests.push(req);
        lineSizes.push(Buffer.byteLength(line));
        let out = script ? script(req, requests.length) : null;
        if (out === null) out = `${JSON.stringify({ id: req.id, ...answer(req) })}\n`;
        if (out === '') {
          conn.destroy();
          return;
        }
        conn.write(out);
      }
    });
  });
  server.listen(socketPath);
  servers.push(server);
  return { socketPath, requests, lineSizes };
}

function clientOf(fake, options = {}) {
  const c = new ic.Client({ socketPath: fake.socketPath, reconnectTimeoutMs: 1000, ...options });
  clients.push(c);
  return c;
}

describe('verifySignature', () => {
  test('the documented vector', () => {
    assert.equal(ic.verifySignature(GITHUB_SECRET, GITHUB_PAYLOAD, GITHUB_SIGNATURE), true);
    assert.equal(ic.verifySignature(Buffer.from(GITHUB_SECRET), new Uint8Array(GITHUB_PAYLOAD),
      GITHUB_SIGNATURE), true);
    assert.equal(ic.verifySignature(GITHUB_SECRET, GITHUB_PAYLOAD,
      `sha256=${GITHUB_SIGNATURE.slice(7).toUpperCase()}`), true);
  });

  test('a bad signature', () => {
    const last = GITHUB_SIGNATURE.at(-1) === '0' ? '1' : '0';
    assert.equal(ic.verifySignature(GITHUB_SECRET, GITHUB_PAYLOAD,
      GITHUB_SIGNATURE.slice(0, -1) + last), false);
    assert.equal(ic.verifySignature(GITHUB_SECRET, Buffer.from('Hello, World?'), GITHUB_SIGNATURE),
      false);
    assert.equal(ic.verifySignature('another secret', GITHUB_PAYLOAD, GITHUB_SIGNATURE), false);
  });

  test('a wrong prefix', () => {
    const digest = GITHUB_SIGNATURE.slice('sha256='.length);
    for (const header of [`sha1=${digest}`, digest, `sha512=${digest}`, `SHA256=${digest}`,
      `sha256:${digest}`]) {
      assert.equal(ic.verifySignature(GITHUB_SECRET, GITHUB_PAYLOAD, header), false, header);
    }
  });

  test('a missing, empty or repeated header', () => {
    for (const header of [undefined, null, '', 'sha256=', '   ', [GITHUB_SIGNATURE]]) {
      assert.equal(ic.verifySignature(GITHUB_SECRET, GITHUB_PAYLOAD, header), false, header);
    }
  });

  test('a different length', () => {
    for (const header of [GITHUB_SIGNATURE.slice(0, -2), `${GITHUB_SIGNATURE}00`,
      GITHUB_SIGNATURE + GITHUB_SIGNATURE.slice(7), `sha256=${'é'.repeat(64)}`,
      `sha256=${'é'.repeat(32)}`, `sha256=${'zz'.repeat(32)}`]) {
      assert.equal(ic.verifySignature(GITHUB_SECRET, GITHUB_PAYLOAD, header), false, header);
    }
  });

  test('misuse throws', () => {
    assert.throws(() => ic.verifySignature('', GITHUB_PAYLOAD, GITHUB_SIGNATURE), TypeError);
    assert.throws(() => ic.verifySignature(undefined, GITHUB_PAYLOAD, GITHUB_SIGNATURE), TypeError);
    // a string body: check the raw bytes as received
    assert.throws(() => ic.verifySignature(GITHUB_SECRET, 'Hello, World!', GITHUB_SIGNATURE),
      TypeError);
  });

  test('a Cloud API body', () => {
    const raw = Buffer.from(JSON.stringify(BODY));
    assert.equal(ic.verifySignature('app-secret', raw, sign('app-secret', raw)), true);
    assert.equal(ic.verifySignature('app-secret', Buffer.concat([raw, Buffer.from(' ')]),
      sign('app-secret', raw)), false);
  });
});

describe('messageIds', () => {
  test('a multi-entry body, in order', () => {
    const events = ic.messageIds(BODY);
    assert.deepEqual(kindsAndKeys(events), BODY_KEYS);
    assert.deepEqual(events.map((e) => e.id), [W1, W2, OUT1, OUT1, W3, OUT2]);
    assert.deepEqual(events.map((e) => e.status), [null, null, 'sent', 'delivered', null, 'read']);
    assert.equal(events[0].item, BODY.entry[0].changes[0].value.messages[0]);
    assert.equal(events[1].contact.profile.name, 'Ana Souza');
    assert.equal(events[2].contact, null);
    assert.equal(events[4].metadata.phone_number_id, '116829341022093');
    assert.deepEqual(events.map((e) => e.entryId),
      [...Array(4).fill('102290129340398'), ...Array(2).fill('110200345501442')]);
  });

  test('tolerates missing and mistyped members', () => {
    const body = {
      entry: [
        {}, null, 'x', { changes: null }, { changes: [null, {}, { value: null }] },
        { changes: [{ value: { messages: 'nope', statuses: { id: 'x' } } }] },
        {
          changes: [{
            value: {
              messages: [{ type: 'text' }, { id: '' }, { id: 7 }, { id: 'wamid.A' }],
              statuses: [{ status: 'read' }, { id: 'wamid.B' }],
            },
          }],
        },
        { changes: [{ field: null, value: { messages: [{ id: 'wamid.C' }] } }] }],
    };
    const events = ic.messageIds(body);
    assert.deepEqual(kindsAndKeys(events),
      [['message', 'wamid.A'], ['status', 'wamid.B:'], ['message', 'wamid.C']]);
    assert.deepEqual(events[0].metadata, {});
    assert.equal(events[0].entryId, null);
    assert.deepEqual(ic.messageIds({}), []);
    assert.deepEqual(ic.messageIds({ object: 'whatsapp_business_account', entry: [] }), []);
  });

  test('rejects what is not an object', () => {
    for (const body of [null, undefined, [], [BODY], '{}', Buffer.from(JSON.stringify(BODY)), 3]) {
      assert.throws(() => ic.messageIds(body), (e) => e instanceof TypeError
        && /parsed JSON object/.test(e.message));
    }
  });
});

describe('seen and seenBatch against a fake agent', () => {
  test('seen: first, then again', async () => {
    const fake = fakeSeenAgent();
    const c = clientOf(fake);
    assert.deepEqual(await c.seen('t1', 'whatsapp', W1, { meta: { from: '16505551234' } }),
      { first: true });
    const again = await c.seen('t1', 'whatsapp', W1, { ttlMs: 604800000 });
    assert.equal(again.first, false);
    assert.equal(again.count, 2);
    assert.deepEqual(again.meta, { from: '16505551234' });
    assert.equal(typeof again.first_seen_at_ms, 'number');
    assert.deepEqual(await c.seen('t2', 'whatsapp', W1), { first: true }); // per tenant
    assert.deepEqual(fake.requests[0], {
      id: 1, op: 'seen', tenant_id: 't1', channel: 'whatsapp', message_id: W1,
      meta: { from: '16505551234' },
    });
    assert.equal(fake.requests[1].ttl_ms, 604800000);
    assert.equal('meta' in fake.requests[1], false);
  });

  test('seenBatch: results in request order', async () => {
    const fake = fakeSeenAgent();
    const c = clientOf(fake);
    await c.seen('t1', 'whatsapp', W2);
    const results = await c.seenBatch('t1', 'whatsapp',
      [W1, { messageId: W2 }, { message_id: W3, meta: { n: 3 } }], { ttlMs: 1000 });
    assert.deepEqual(results.map((r) => [r.message_id, r.first]),
      [[W1, true], [W2, false], [W3, true]]);
    assert.equal(results[1].count, 2);
    const req = fake.requests[1];
    assert.deepEqual(req.messages, [{ message_id: W1 }, { message_id: W2 },
      { message_id: W3, meta: { n: 3 } }]);
    assert.equal(req.ttl_ms, 1000);
    assert.equal('message_id' in req, false);
  });

  test('errors are typed', async () => {
    const c = clientOf(fakeSeenAgent());
    await assert.rejects(c.seenBatch('t1', 'whatsapp', []),
      (e) => e instanceof ic.InvalidField && e.field === 'messages');
    await assert.rejects(c.seen('t1', 'whatsapp', undefined),
      (e) => e instanceof ic.MissingField && e.field === 'message_id');
    for (const bad of ['wamid.X', { messageId: 'wamid.X' }, [3], [null], null]) {
      await assert.rejects(c.seenBatch('t1', 'whatsapp', bad), TypeError);
    }
  });

  test('an agent without the op', async () => {
    const c = clientOf(fakeSeenAgent((req) => `${JSON.stringify({
      id: req.id, ok: false, error: { code: 'unknown_op', message: 'unknown op "seen"', field: 'op' },
    })}\n`));
    await assert.rejects(c.seen('t1', 'whatsapp', W1), ic.UnknownOp);
  });

  test('seen is not resent after the connection broke', async () => {
    const fake = fakeSeenAgent(() => '');
    const c = clientOf(fake);
    await assert.rejects(c.seenBatch('t1', 'whatsapp', [W1]), (e) => e instanceof ic.Unavailable
      && /outcome is unknown/.test(e.message) && /first=false/.test(e.message));
    assert.equal(fake.requests.length, 1);
  });
});

describe('firstSightings against a fake agent', () => {
  test('a redelivery yields nothing', async () => {
    const fake = fakeSeenAgent();
    const c = clientOf(fake);
    const events = await ic.firstSightings(c, 't1', BODY);
    assert.deepEqual(kindsAndKeys(events), BODY_KEYS);
    assert.equal(events[0].item.text.body, 'Quero pagar a fatura FAT-2026-000123');
    assert.deepEqual(await ic.firstSightings(c, 't1', clone(BODY)), []);
    assert.equal(fake.requests.length, 2); // one call per delivery
    assert.equal(fake.requests[0].channel, 'whatsapp');
    assert.deepEqual(fake.requests[0].messages.map((m) => m.message_id),
      BODY_KEYS.map(([, k]) => k));
  });

  test('a new status of a seen message is an event', async () => {
    const c = clientOf(fakeSeenAgent());
    await ic.firstSightings(c, 't1', BODY);
    const later = clone(BODY);
    const { statuses } = later.entry[0].changes[1].value;
    statuses.push({ ...statuses[1], status: 'read', timestamp: '1749416460' });
    const events = await ic.firstSightings(c, 't1', later);
    assert.deepEqual(events.map((e) => [e.kind, e.key, e.status]),
      [['status', `${OUT1}:read`, 'read']]);
  });

  test('a repeat inside one body counts once', async () => {
    const fake = fakeSeenAgent();
    const c = clientOf(fake);
    const events = await ic.firstSightings(c, 't1', bodyWithMessages([W1, W2, W1]));
    assert.deepEqual(events.map((e) => e.id), [W1, W2]);
    assert.deepEqual(fake.requests[0].messages.map((m) => m.message_id), [W1, W2]);
  });

  test('no call without events', async () => {
    const fake = fakeSeenAgent();
    const c = clientOf(fake);
    const onlyTemplate = {
      object: 'whatsapp_business_account',
      entry: [{ ...BODY.entry[1], changes: BODY.entry[1].changes.slice(0, 1) }],
    };
    assert.deepEqual(await ic.firstSightings(c, 't1', onlyTemplate), []);
    assert.deepEqual(await ic.firstSightings(c, 't1', {}), []);
    assert.deepEqual(fake.requests, []);
    await assert.rejects(ic.firstSightings(c, 't1', JSON.stringify(BODY)), TypeError);
  });

  test('chunks of 1000', async () => {
    const fake = fakeSeenAgent();
    const c = clientOf(fake, { maxFrameBytes: null });
    const ids = Array.from({ length: 1500 }, (_, i) => `wamid.${String(i).padStart(6, '0')}`);
    const events = await ic.firstSightings(c, 't1', bodyWithMessages(ids), { ttlMs: 5000 });
    assert.deepEqual(events.map((e) => e.id), ids);
    assert.deepEqual(fake.requests.map((r) => r.messages.length), [1000, 500]);
    assert.deepEqual(new Set(fake.requests.map((r) => r.ttl_ms)), new Set([5000]));
  });

  test('chunks stay within the frame limit', async () => {
    const fake = fakeSeenAgent();
    const c = clientOf(fake); // default limit 65536
    const ids = Array.from({ length: 1000 },
      (_, i) => `${W1.slice(0, -10)}${String(i).padStart(8, '0')}==`); // ~80 KB of ids
    assert.equal((await ic.firstSightings(c, 't1', bodyWithMessages(ids))).length, 1000);
    assert.ok(fake.requests.length > 1);
    assert.ok(fake.lineSizes.every((n) => n <= 65536), String(fake.lineSizes));
    assert.deepEqual(fake.requests.flatMap((r) => r.messages.map((m) => m.message_id)), ids);
  });

  test('a failed batch keeps the earlier first sightings', async () => {
    const c = clientOf(fakeSeenAgent((req, n) => (n === 2 ? `${JSON.stringify({
      id: req.id, ok: false, error: { code: 'storage_error', message: 'disk full' },
    })}\n` : null)), { maxFrameBytes: null });
    const ids = Array.from({ length: 1200 }, (_, i) => `wamid.${String(i).padStart(6, '0')}`);
    await assert.rejects(ic.firstSightings(c, 't1', bodyWithMessages(ids)), (e) => {
      assert.ok(e instanceof ic.StorageError);
      assert.deepEqual(e.firstSightings.map((ev) => ev.id), ids.slice(0, 1000));
      return true;
    });
  });

  test('an answer that does not match is a protocol error', async () => {
    const c = clientOf(fakeSeenAgent((req) => `${JSON.stringify({
      id: req.id,
      ok: true,
      results: req.messages.map(() => ({ message_id: 'wamid.other', first: true })),
    })}\n`));
    await assert.rejects(ic.firstSightings(c, 't1', BODY), ic.ProtocolError);
  });

  test('the chunk plan counts bytes', () => {
    const keys = Array(3000).fill('k'.repeat(100));
    const chunks = seenChunks(keys, 't1', 'whatsapp', undefined, 65536);
    assert.equal(chunks.reduce((n, ch) => n + ch.length, 0), 3000);
    for (const ch of chunks) {
      assert.ok(ch.length <= 1000);
      const line = JSON.stringify({
        id: 99999, op: 'seen', tenant_id: 't1', channel: 'whatsapp',
        messages: ch.map((k) => ({ message_id: k })),
      });
      assert.ok(Buffer.byteLength(line) <= 65536);
    }
  });
});

describe('examples/webhook_receiver.js as a process', () => {
  const SECRET = 'app-secret-for-tests';
  const TOKEN = 'verify-token-for-tests';

  async function startReceiver(fake) {
    const dir = tmpdir('intentd-webhook-example-');
    const secretFile = path.join(dir, 'app_secret');
    fs.writeFileSync(secretFile, `${SECRET}\n`);
    const env = {
      ...process.env, WHATSAPP_APP_SECRET_FILE: secretFile, WHATSAPP_VERIFY_TOKEN: TOKEN,
      INTENTD_SOCKET: fake.socketPath, INTENTD_TENANT: 't1', WEBHOOK_PORT: '0',
    };
    delete env.WHATSAPP_APP_SECRET;
    const proc = spawn(process.execPath, [EXAMPLE], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    const lines = [];
    let out = '';
    proc.stdout.setEncoding('utf8');
    proc.stdout.on('data', (d) => {
      out += d;
      let nl;
      while ((nl = out.indexOf('\n')) >= 0) {
        lines.push(JSON.parse(out.slice(0, nl)));
        out = out.slice(nl + 1);
      }
    });
    let err = '';
    proc.stderr.setEncoding('utf8');
    const base = await new Promise((resolve, reject) => {
      proc.stderr.on('data', (d) => {
        err += d;
        const m = /listening on (http:\/\/\S+)/.exec(err);
        if (m) resolve(m[1]);
      });
      proc.once('exit', (code) => reject(new Error(`receiver exited ${code}: ${err}`)));
    });
    return { proc, lines, base };
  }

  function request(base, method, pathname, data, headers = {}) {
    return new Promise((resolve, reject) => {
      const req = http.request(new URL(pathname, base), { method, headers }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d) => { text += d; });
        res.on('end', () => resolve([res.statusCode, text]));
      });
      req.on('error', reject);
      req.end(data);
    });
  }

  async function waitFor(cond, timeoutMs = 5000) {
    const deadline = Date.now() + timeoutMs;
    while (!cond()) {
      if (Date.now() > deadline) throw new Error('timed out');
      await sleep(20);
    }
  }

  test('handshake, signature, 200, first sightings printed once', async (t) => {
    const fake = fakeSeenAgent();
    const { proc, lines, base } = await startReceiver(fake);
    t.after(() => proc.kill('SIGKILL'));

    assert.deepEqual(await request(base,
      'GET', `/webhook?hub.mode=subscribe&hub.verify_token=${TOKEN}&hub.challenge=1158201444`),
    [200, '1158201444']);
    assert.equal((await request(base, 'GET',
      '/webhook?hub.mode=subscribe&hub.verify_token=nope&hub.challenge=1'))[0], 403);
    assert.equal((await request(base, 'GET',
      `/webhook?hub.verify_token=${TOKEN}&hub.challenge=1`))[0], 403);

    const raw = Buffer.from(JSON.stringify(BODY));
    const json = { 'Content-Type': 'application/json' };
    assert.equal((await request(base, 'POST', '/webhook', raw, json))[0], 403);
    assert.equal((await request(base, 'POST', '/webhook', raw,
      { ...json, 'X-Hub-Signature-256': sign('other', raw) }))[0], 403);
    const good = { ...json, 'X-Hub-Signature-256': sign(SECRET, raw) };
    assert.deepEqual(await request(base, 'POST', '/webhook', raw, good), [200, 'ok']);
    await waitFor(() => lines.length === BODY_KEYS.length);
    assert.deepEqual(lines.map((x) => [x.kind, x.key]), BODY_KEYS);
    assert.equal(lines[0].tenant_id, 't1');
    assert.equal(lines[0].item.text.body, 'Quero pagar a fatura FAT-2026-000123');
    // Meta redelivers: accepted, nothing new reaches the bot.
    assert.equal((await request(base, 'POST', '/webhook', raw, good))[0], 200);
    await waitFor(() => fake.requests.length === 2);
    await sleep(100);
    assert.equal(lines.length, BODY_KEYS.length);
  });
});
