// WhatsApp webhook helpers and the seen, done and forget ops, offline.
//
// seen, seenBatch, done, forget and firstSightings run here against
// fakeSeenAgent below, a tiny Unix-socket server that answers per the ops'
// contract on a clock the tests can move (lease and record expiry in no time,
// errors on demand); test/client.test.js runs the same ops against the real
// agent. The signature check, the extraction and the example receiver need no
// agent at all.
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

// Answers seen, done and forget per their contract from an in-memory store.
// Its clock, fake.now.ms, moves 1 ms per message; a test moves it further to
// let leases and records expire. script(req, n) may override an answer: a
// string to send, '' to hang up, null for the contract's answer.
const DEFAULT_TTL_MS = 7 * 24 * 3600 * 1000;

function fakeSeenAgent(script = null) {
  const socketPath = path.join(tmpdir('intentd-fake-seen-'), 'fake.sock');
  const requests = [];
  const lineSizes = [];
  const store = new Map();
  const now = { ms: 1764700000000 };

  function live(key) {
    const rec = store.get(key);
    if (rec && rec.expires_at_ms <= now.ms) {
      store.delete(key);
      return undefined;
    }
    return rec;
  }

  function record(tenant, channel, messageId, meta, ttlMs, leaseMs) {
    const key = JSON.stringify([tenant, channel, messageId]);
    let rec = live(key);
    let first = !rec;
    if (!rec) {
      rec = {
        first_seen_at_ms: now.ms, count: 0, meta: meta ?? null,
        state: leaseMs == null ? 'seen' : 'processing', expires_at_ms: 0, lease_token: 0,
        lease_until_ms: 0,
      };
      store.set(key, rec);
    } else if (leaseMs != null && rec.state === 'processing' && rec.lease_until_ms <= now.ms) {
      first = true; // an expired claim taken over
    }
    if (first && leaseMs != null) {
      rec.lease_token += 1;
      rec.lease_until_ms = now.ms + leaseMs;
    }
    rec.count += 1;
    rec.expires_at_ms = Math.max(rec.expires_at_ms, now.ms + (ttlMs ?? DEFAULT_TTL_MS));
    const out = {
      first, state: rec.state, count: rec.count, first_seen_at_ms: rec.first_seen_at_ms,
      expires_at_ms: rec.expires_at_ms,
    };
    if (rec.meta !== null) out.meta = rec.meta;
    if (leaseMs != null && first) {
      out.lease_token = rec.lease_token;
      out.lease_until_ms = rec.lease_until_ms;
    } else if (leaseMs != null && rec.state === 'processing') {
      out.retry_after_ms = rec.lease_until_ms - now.ms;
    }
    return out;
  }

  function done(req) {
    if (typeof req.message_id !== 'string') {
      return errorAnswer('missing_field', 'message_id is required', 'message_id');
    }
    const token = req.lease_token;
    if (!Number.isInteger(token)) {
      return errorAnswer('missing_field', 'lease_token is required', 'lease_token');
    }
    const rec = live(JSON.stringify([req.tenant_id, req.channel, req.message_id]));
    if (!rec) return errorAnswer('not_found', 'no live record of this message', 'message_id');
    if (rec.state === 'seen') {
      return errorAnswer('invalid_state', 'a plain sighting, not a claim', 'lease_token');
    }
    if (token > rec.lease_token) {
      return errorAnswer('invalid_state', 'this lease token was never granted', 'lease_token');
    }
    if (rec.state === 'done') {
      return token === rec.lease_token ? { ok: true, state: 'done' }
        : errorAnswer('invalid_state', 'done under another token', 'lease_token');
    }
    if (token < rec.lease_token) {
      return errorAnswer('lease_lost', 'a newer claim took the message over', 'lease_token');
    }
    rec.state = 'done';
    return { ok: true, state: 'done' };
  }

  function answer(req) {
    if (!['seen', 'done', 'forget'].includes(req.op)) {
      return errorAnswer('unknown_op', `unknown op "${req.op}"`, 'op');
    }
    for (const name of ['tenant_id', 'channel']) {
      if (typeof req[name] !== 'string' || req[name] === '') {
        return errorAnswer('missing_field', `${name} is required`, name);
      }
    }
    now.ms += 1;
    if (req.op === 'done') return done(req);
    if (req.op === 'forget') {
      if (typeof req.message_id !== 'string') {
        return errorAnswer('missing_field', 'message_id is required', 'message_id');
      }
      const key = JSON.stringify([req.tenant_id, req.channel, req.message_id]);
      const forgotten = live(key) !== undefined;
      store.delete(key);
      return { ok: true, forgotten };
    }
    for (const name of ['ttl_ms', 'lease_ms']) {
      if (name in req && !(Number.isInteger(req[name]) && req[name] > 0)) {
        return errorAnswer('invalid_field', `${name} must be a positive integer`, name);
      }
    }
    if ('messages' in req) {
      if ('message_id' in req) {
        return errorAnswer('invalid_field', 'message_id or messages, not both', 'message_id');
      }
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
          message_id: m.message_id,
          ...record(req.tenant_id, req.channel, m.message_id, 'meta' in m ? m.meta : req.meta,
            req.ttl_ms, req.lease_ms),
        })),
      };
    }
    if (typeof req.message_id !== 'string') {
      return errorAnswer('missing_field', 'message_id is required', 'message_id');
    }
    return {
      ok: true,
      ...record(req.tenant_id, req.channel, req.message_id, req.meta, req.ttl_ms, req.lease_ms),
    };
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
        let out = script ? script(req, requests.length, answer) : null;
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
  return {
    socketPath, requests, lineSizes, now,
  };
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

const hangUpAfter = (ns) => (req, n, answer) => {
  if (!ns.includes(n)) return null;
  answer(req); // it took effect; the answer is lost
  return '';
};

describe('seen, seenBatch, done and forget against a fake agent', () => {
  test('seen: first, then again', async () => {
    const fake = fakeSeenAgent();
    const c = clientOf(fake);
    const first = await c.seen('t1', 'whatsapp', W1, { meta: { from: '16505551234' } });
    assert.deepEqual([first.first, first.state, first.count], [true, 'seen', 1]);
    assert.deepEqual(first.meta, { from: '16505551234' });
    assert.equal('lease_token' in first, false);
    const again = await c.seen('t1', 'whatsapp', W1, { ttlMs: 604800000 });
    assert.deepEqual([again.first, again.state, again.count], [false, 'seen', 2]);
    assert.deepEqual(again.meta, { from: '16505551234' });
    assert.equal(again.first_seen_at_ms, first.first_seen_at_ms);
    assert.equal(typeof again.expires_at_ms, 'number');
    assert.equal((await c.seen('t2', 'whatsapp', W1)).first, true); // per tenant
    assert.equal((await c.seen('t1', 'instagram', W1)).first, true); // per channel
    assert.deepEqual(fake.requests[0], {
      id: 1, op: 'seen', tenant_id: 't1', channel: 'whatsapp', message_id: W1,
      meta: { from: '16505551234' },
    });
    assert.equal(fake.requests[1].ttl_ms, 604800000);
    assert.equal('meta' in fake.requests[1], false);
    assert.equal('lease_ms' in fake.requests[1], false);
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

  test('seenBatch: a default meta, a repeat', async () => {
    const fake = fakeSeenAgent();
    const c = clientOf(fake);
    const results = await c.seenBatch('t1', 'whatsapp',
      [W1, { messageId: W2, meta: 'own' }, W1], { meta: { src: 'hook' } });
    assert.deepEqual(fake.requests[0].meta, { src: 'hook' });
    assert.deepEqual(results.map((r) => [r.first, r.count, r.meta]),
      [[true, 1, { src: 'hook' }], [true, 1, 'own'], [false, 2, { src: 'hook' }]]);
  });

  test('a claim, then done', async () => {
    const fake = fakeSeenAgent();
    const c = clientOf(fake);
    const claim = await c.seen('t1', 'whatsapp', W1, { leaseMs: 30000 });
    assert.equal(fake.requests[0].lease_ms, 30000);
    assert.deepEqual([claim.first, claim.state, claim.lease_token], [true, 'processing', 1]);
    assert.equal(claim.lease_until_ms, claim.first_seen_at_ms + 30000);
    const busy = await c.seen('t1', 'whatsapp', W1, { leaseMs: 30000 });
    assert.deepEqual([busy.first, busy.state], [false, 'processing']);
    assert.ok(busy.retry_after_ms > 0);
    assert.equal('lease_token' in busy, false);
    const plain = await c.seen('t1', 'whatsapp', W1);
    assert.deepEqual([plain.first, plain.count], [false, 3]);
    assert.equal('retry_after_ms' in plain, false);
    assert.deepEqual(await c.done('t1', 'whatsapp', W1, claim.lease_token), { state: 'done' });
    assert.deepEqual(fake.requests.at(-1), {
      id: 4, op: 'done', tenant_id: 't1', channel: 'whatsapp', message_id: W1, lease_token: 1,
    });
    assert.deepEqual(await c.done('t1', 'whatsapp', W1, 1), { state: 'done' }); // repeated
    const after = await c.seen('t1', 'whatsapp', W1, { leaseMs: 30000 });
    assert.deepEqual([after.first, after.state, after.count], [false, 'done', 4]);
    assert.equal('retry_after_ms' in after, false);
  });

  test('an expired claim is taken over', async () => {
    const fake = fakeSeenAgent();
    const c = clientOf(fake);
    const results = await c.seenBatch('t1', 'whatsapp', [W1, W2], { leaseMs: 1000 });
    assert.deepEqual(results.map((r) => [r.first, r.lease_token]), [[true, 1], [true, 1]]);
    fake.now.ms += 5000; // the processor died: its lease ran out
    const [again] = await c.seenBatch('t1', 'whatsapp', [W1], { leaseMs: 1000 });
    assert.deepEqual([again.first, again.state, again.lease_token], [true, 'processing', 2]);
    await assert.rejects(c.done('t1', 'whatsapp', W1, 1), // the dead one's token
      (e) => e instanceof ic.LeaseLost && e.field === 'lease_token');
    assert.deepEqual(await c.done('t1', 'whatsapp', W1, 2), { state: 'done' });
    // An expired claim nobody took over is still current.
    assert.deepEqual(await c.done('t1', 'whatsapp', W2, 1), { state: 'done' });
  });

  test('done: errors are typed', async () => {
    const c = clientOf(fakeSeenAgent());
    await assert.rejects(c.done('t1', 'whatsapp', W1, 1),
      (e) => e instanceof ic.NotFound && e.field === 'message_id');
    await c.seen('t1', 'whatsapp', W1);
    await assert.rejects(c.done('t1', 'whatsapp', W1, 1), // a plain sighting
      (e) => e instanceof ic.InvalidState && e.field === 'lease_token');
    await c.seen('t1', 'whatsapp', W2, { leaseMs: 1000 });
    await assert.rejects(c.done('t1', 'whatsapp', W2, 7), ic.InvalidState); // never granted
    await c.forget('t1', 'whatsapp', W2);
    await assert.rejects(c.done('t1', 'whatsapp', W2, 1), ic.NotFound); // forgotten meanwhile
    await assert.rejects(c.done('t1', 'whatsapp', W1),
      (e) => e instanceof ic.MissingField && e.field === 'lease_token');
  });

  test('forget', async () => {
    const fake = fakeSeenAgent();
    const c = clientOf(fake);
    await c.seen('t1', 'whatsapp', W1);
    assert.deepEqual(await c.forget('t1', 'whatsapp', W1), { forgotten: true });
    assert.deepEqual(fake.requests.at(-1), {
      id: 2, op: 'forget', tenant_id: 't1', channel: 'whatsapp', message_id: W1,
    });
    assert.deepEqual(await c.forget('t1', 'whatsapp', W1), { forgotten: false });
    const again = await c.seen('t1', 'whatsapp', W1);
    assert.deepEqual([again.first, again.count], [true, 1]);
  });

  test('forget needs admin rights', async () => {
    const c = clientOf(fakeSeenAgent((req) => `${JSON.stringify({
      id: req.id, ok: false, error: { code: 'forbidden', message: 'forget is an admin op' },
    })}\n`));
    await assert.rejects(c.forget('t1', 'whatsapp', W1), ic.Forbidden);
  });

  test('an expired record reads as never seen', async () => {
    const fake = fakeSeenAgent();
    const c = clientOf(fake);
    await c.seen('t1', 'whatsapp', W1, { ttlMs: 1000 });
    fake.now.ms += 2000;
    const again = await c.seen('t1', 'whatsapp', W1);
    assert.deepEqual([again.first, again.count], [true, 1]);
  });

  test('errors are typed', async () => {
    const c = clientOf(fakeSeenAgent());
    await assert.rejects(c.seenBatch('t1', 'whatsapp', []),
      (e) => e instanceof ic.InvalidField && e.field === 'messages');
    await assert.rejects(c.seen('t1', 'whatsapp', undefined),
      (e) => e instanceof ic.MissingField && e.field === 'message_id');
    await assert.rejects(c.seen('t1', 'whatsapp', W1, { leaseMs: 0 }),
      (e) => e instanceof ic.InvalidField && e.field === 'lease_ms');
    for (const bad of ['wamid.X', { messageId: 'wamid.X' }, [3], [null], null]) {
      await assert.rejects(c.seenBatch('t1', 'whatsapp', bad), TypeError);
    }
  });

  test('an agent without the ops', async () => {
    const c = clientOf(fakeSeenAgent((req) => `${JSON.stringify({
      id: req.id, ok: false, error: { code: 'unknown_op', message: `unknown op "${req.op}"`, field: 'op' },
    })}\n`));
    await assert.rejects(c.seen('t1', 'whatsapp', W1), ic.UnknownOp);
    await assert.rejects(c.done('t1', 'whatsapp', W1, 1), ic.UnknownOp);
    await assert.rejects(c.forget('t1', 'whatsapp', W1), ic.UnknownOp);
  });

  test('seen is not resent after the connection broke', async () => {
    const fake = fakeSeenAgent(() => '');
    const c = clientOf(fake);
    await assert.rejects(c.seenBatch('t1', 'whatsapp', [W1]), (e) => e instanceof ic.Unavailable
      && /outcome is unknown/.test(e.message) && /first=false/.test(e.message));
    assert.equal(fake.requests.length, 1);
    await assert.rejects(c.seen('t1', 'whatsapp', W1, { leaseMs: 1000 }),
      (e) => e instanceof ic.Unavailable && /until that lease expires/.test(e.message));
    assert.equal(fake.requests.length, 2);
  });

  test('done and forget are resent after the connection broke', async () => {
    const fake = fakeSeenAgent(hangUpAfter([3, 5]));
    const c = clientOf(fake);
    const { lease_token: token } = await c.seen('t1', 'whatsapp', W1, { leaseMs: 1000 });
    await c.seen('t1', 'whatsapp', W2);
    assert.deepEqual(await c.done('t1', 'whatsapp', W1, token), { state: 'done' });
    assert.deepEqual(await c.forget('t1', 'whatsapp', W2), { forgotten: false });
    assert.deepEqual(fake.requests.map((r) => r.op),
      ['seen', 'seen', 'done', 'done', 'forget', 'forget']);
    assert.deepEqual(fake.requests[2], fake.requests[3]); // the same request, same id
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

  test('an entry the agent refuses by name is reported and the rest recorded', async () => {
    const fake = fakeSeenAgent((req, n) => (n === 1 ? `${JSON.stringify({
      id: req.id,
      ok: false,
      error: { code: 'invalid_field', message: 'messages[1].message_id must not be blank',
        field: 'messages[1].message_id' },
    })}\n` : null));
    const c = clientOf(fake);
    const found = await ic.firstSightings(c, 't1', bodyWithMessages([W1, W2, W3]));
    assert.deepEqual(found.map((e) => e.id), [W1, W3]);
    assert.deepEqual(found.rejected.map((e) => [e.id, e.reason]),
      [[W2, 'messages[1].message_id must not be blank']]);
    assert.deepEqual(fake.requests[1].messages.map((m) => m.message_id), [W1, W3]);
    // An error that names no entry rejects as before.
    const c2 = clientOf(fakeSeenAgent((req) => `${JSON.stringify({
      id: req.id, ok: false, error: { code: 'invalid_field', message: 'bad ttl', field: 'ttl_ms' },
    })}\n`));
    await assert.rejects(ic.firstSightings(c2, 't1', bodyWithMessages([W1])), ic.InvalidField);
  });

  test('an answer that does not match is a protocol error', async () => {
    const c = clientOf(fakeSeenAgent((req) => `${JSON.stringify({
      id: req.id,
      ok: true,
      results: req.messages.map(() => ({ message_id: 'wamid.other', first: true })),
    })}\n`));
    await assert.rejects(ic.firstSightings(c, 't1', BODY), ic.ProtocolError);
  });

  test('the plain mode has nothing in progress', async () => {
    const c = clientOf(fakeSeenAgent());
    const events = await ic.firstSightings(c, 't1', BODY);
    assert.deepEqual(events.inProgress, []);
    assert.ok(events.every((e) => !('leaseToken' in e)));
    await c.seenBatch('t1', 'whatsapp', ['wamid.CLAIMED'], { leaseMs: 60000 });
    const again = await ic.firstSightings(c, 't1', bodyWithMessages(['wamid.CLAIMED']));
    assert.deepEqual([again, again.inProgress], [[], []]);
  });

  test('the claim mode carries the lease token', async () => {
    const fake = fakeSeenAgent();
    const c = clientOf(fake);
    const events = await ic.firstSightings(c, 't1', BODY, { leaseMs: 30000 });
    assert.deepEqual(kindsAndKeys(events), BODY_KEYS);
    assert.deepEqual(new Set(events.map((e) => e.leaseToken)), new Set([1]));
    assert.ok(events.every((e) => Number.isInteger(e.leaseUntilMs)));
    assert.equal(fake.requests[0].lease_ms, 30000);
    // Meta redelivers while the bot still works: nothing to hand over, and
    // the result says the events are held elsewhere.
    const busy = await ic.firstSightings(c, 't1', clone(BODY), { leaseMs: 30000 });
    assert.deepEqual(busy, []);
    assert.deepEqual(busy.inProgress.map((e) => e.key), BODY_KEYS.map(([, k]) => k));
    assert.ok(busy.inProgress.every((e) => e.retryAfterMs > 0 && e.retryAfterMs <= 30000));
    for (const e of events) {
      assert.deepEqual(await c.done('t1', 'whatsapp', e.key, e.leaseToken), { state: 'done' });
    }
    const after = await ic.firstSightings(c, 't1', clone(BODY), { leaseMs: 30000 });
    assert.deepEqual([after, after.inProgress], [[], []]);
  });

  test('the claim mode hands over what a dead processor held', async () => {
    const fake = fakeSeenAgent();
    const c = clientOf(fake);
    const first = await ic.firstSightings(c, 't1', bodyWithMessages([W1, W2]),
      { leaseMs: 1000 });
    await c.done('t1', 'whatsapp', W1, first[0].leaseToken); // W2's processor dies
    fake.now.ms += 1500;
    const again = await ic.firstSightings(c, 't1', bodyWithMessages([W1, W2, W3]),
      { leaseMs: 1000 });
    assert.deepEqual(again.map((e) => [e.id, e.leaseToken]), [[W2, 2], [W3, 1]]);
    assert.deepEqual(again.inProgress, []);
    await assert.rejects(c.done('t1', 'whatsapp', W2, first[1].leaseToken), ic.LeaseLost);
  });

  test('the claim mode needs lease tokens', async () => {
    const c = clientOf(fakeSeenAgent((req) => `${JSON.stringify({
      id: req.id,
      ok: true,
      results: req.messages.map((m) => ({
        message_id: m.message_id, first: true, state: 'processing',
      })),
    })}\n`));
    assert.equal((await ic.firstSightings(c, 't1', BODY)).length, BODY_KEYS.length);
    await assert.rejects(ic.firstSightings(c, 't1', BODY, { leaseMs: 1000 }), ic.ProtocolError);
  });

  test('a failed claim batch keeps the earlier claims', async () => {
    const c = clientOf(fakeSeenAgent((req, n) => (n === 2 ? `${JSON.stringify({
      id: req.id, ok: false, error: { code: 'storage_error', message: 'disk full' },
    })}\n` : null)), { maxFrameBytes: null });
    const ids = Array.from({ length: 1200 }, (_, i) => `wamid.${String(i).padStart(6, '0')}`);
    await assert.rejects(ic.firstSightings(c, 't1', bodyWithMessages(ids), { leaseMs: 60000 }),
      (e) => {
        assert.ok(e instanceof ic.StorageError);
        assert.deepEqual(e.firstSightings.map((ev) => ev.id), ids.slice(0, 1000));
        assert.deepEqual(new Set(e.firstSightings.map((ev) => ev.leaseToken)), new Set([1]));
        return true;
      });
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
    for (const ch of seenChunks(keys, 't1', 'whatsapp', 604800000, 65536, 3600000)) {
      const line = JSON.stringify({
        id: 1e19, op: 'seen', tenant_id: 't1', channel: 'whatsapp', ttl_ms: 604800000,
        lease_ms: 3600000, messages: ch.map((k) => ({ message_id: k })),
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
