// The client against a real agent: every op, typed errors, reconnect; and
// transport behaviour against a scripted fake agent.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import * as ic from '../index.js';
import {
  AgentProcess, cpf, pix, ref, sleepPast,
} from './agent-process.js';

const T = 'acme';
const PIX = 'pix.cobranca';

describe('ops against a real agent', () => {
  let agent;
  let client;
  before(async () => {
    agent = await new AgentProcess().start();
    client = new ic.Client({ socketPath: agent.socket, reconnectTimeoutMs: 2000 });
  });
  after(async () => {
    client.close();
    await agent.cleanup();
  });

  test('ping reports protocol 1', async () => {
    const r = await client.ping();
    assert.equal(r.protocol, 1);
    assert.equal(typeof r.version, 'string');
  });

  test('derive ignores CPF punctuation and stores nothing', async () => {
    const r = ref();
    const a = await client.derive(T, PIX, pix(r, { chave: cpf('111222333') }));
    const b = await client.derive(T, PIX, pix(r, { chave: cpf('111222333', false) }));
    assert.equal(a.key, b.key);
    assert.match(a.key, /^[0-9a-f]{64}$/);
    assert.equal(a.txid, a.key.slice(0, 35));
    assert.equal((await client.lookup(T, r, PIX)).found, false);
  });

  test('freeze writes once and reports divergence', async () => {
    const r = ref();
    const first = await client.freeze(T, r, PIX, pix(r));
    assert.equal(first.created, true);
    const again = await client.freeze(T, r, PIX, pix(r, { valor: '1800.00' }));
    assert.equal(again.created, false);
    assert.deepEqual(again.diverged_fields, ['valor']);
    assert.equal(again.key, first.key);
  });

  test('begin, complete, replay; null responses survive', async () => {
    const r = ref();
    const b = await client.begin(T, r, PIX, pix(r));
    assert.equal(b.decision, 'execute');
    assert.equal(b.lease_token, 1);
    assert.equal((await client.complete(T, b.key, 1, null)).status, 'completed');
    const again = await client.begin(T, r, PIX);
    assert.equal(again.decision, 'replay');
    assert.equal(again.response, null);
    assert.ok('response' in again);
  });

  test('in_flight, fail retriable then terminal', async () => {
    const r = ref();
    const b = await client.begin(T, r, PIX, pix(r), { leaseMs: 60000 });
    const f = await client.begin(T, r, PIX);
    assert.equal(f.decision, 'in_flight');
    assert.ok(f.retry_after_ms > 50000);
    assert.equal((await client.fail(T, b.key, 1, 'not sent', { retriable: true })).status,
      'released');
    const b2 = await client.begin(T, r, PIX);
    assert.equal(b2.attempt, 2);
    await client.fail(T, b2.key, 2, { reason: 'declined' }, { retriable: false });
    const b3 = await client.begin(T, r, PIX);
    assert.equal(b3.status, 'failed');
    assert.deepEqual(b3.error, { reason: 'declined' });
    assert.throws(() => client.fail(T, b.key, 1, 'x', {}), TypeError);
  });

  test('renew, status, lookup, amend, uncertain, stats', async () => {
    const tenant = `t-${ref()}`;
    const r = ref();
    const b = await client.begin(tenant, r, PIX, pix(r), { leaseMs: 1000 });
    assert.deepEqual(await client.uncertain(tenant), []);
    await sleepPast(b.lease_until_ms);
    const listed = await client.uncertain(tenant, { limit: 5 });
    assert.deepEqual(listed.map((a) => a.key), [b.key]);
    const rn = await client.renew(tenant, b.key, 1, { leaseMs: 60000 });
    assert.ok(rn.lease_until_ms > b.lease_until_ms + 50000);
    assert.equal((await client.status(tenant, b.key)).action.status, 'started');
    assert.equal((await client.lookup(tenant, r, PIX)).action.lease_token, 1);
    await client.complete(tenant, b.key, 1, { charged: '180.00' });
    await assert.rejects(client.amend(tenant, r, PIX, pix(r, { valor: '1800.00' })),
      ic.InvalidState);
    const a = await client.amend(tenant, r, PIX, pix(r, { valor: '1800.00' }), { force: true });
    assert.equal(a.previous_key, b.key);
    assert.notEqual(a.key, b.key);
    const stats = await client.stats();
    assert.ok(stats.decisions.execute >= 1);
    assert.ok('uptime_ms' in stats);
  });

  test('typed errors carry code, message and field', async () => {
    const r = ref();
    const check = async (promise, Cls, field) => {
      await assert.rejects(promise, (e) => {
        assert.ok(e instanceof Cls, `${e.name}: ${e.message}`);
        assert.ok(e instanceof ic.IntentdError);
        assert.equal(e.code, Cls.code);
        assert.ok(e.message.length > 0);
        if (field) assert.equal(e.field, field);
        return true;
      });
    };
    await check(client.begin(T, r, PIX), ic.MissingField);
    await check(client.begin(T, r, 'pix.estorno', pix(r)), ic.UnknownActionType);
    await check(client.begin(T, r, PIX, pix(r), { leaseMs: 5 }), ic.InvalidField, 'lease_ms');
    await check(client.derive(T, PIX, pix(r, { chave: '111.222.333-44' })), ic.InvalidField,
      'chave_pix_destino');
    await check(client.request('charge_twice'), ic.UnknownOp);
    await check(client.status(T, '0'.repeat(64)), ic.NotFound);
    await client.freeze(T, r, PIX, pix(r));
    await check(client.begin(T, r, PIX, pix(r, { valor: '9.99' }), { onDivergence: 'reject' }),
      ic.PayloadMismatch);
    const b = await client.begin(T, r, PIX, undefined, { leaseMs: 1000 });
    await sleepPast(b.lease_until_ms);
    const rec = await client.begin(T, r, PIX);
    assert.equal(rec.decision, 'recover');
    await check(client.complete(T, b.key, 1, 'late'), ic.LeaseLost);
    await client.complete(T, b.key, rec.lease_token, 'done');
    await check(client.renew(T, b.key, rec.lease_token), ic.InvalidState);
    await check(client.derive(T, PIX, { ...pix(r), blob: 'x'.repeat(70000) }), ic.FrameTooLarge);
  });

  test('every protocol code maps to its class', () => {
    for (const [code, Cls] of Object.entries(ic.ERRORS_BY_CODE)) {
      const e = ic.errorFromResponse({ ok: false, error: { code, message: 'm', field: 'f' } });
      assert.ok(e instanceof Cls);
      assert.deepEqual([e.code, e.message, e.field], [code, 'm', 'f']);
    }
    assert.equal(Object.keys(ic.ERRORS_BY_CODE).length, 16);
    assert.equal(ic.ERRORS_BY_CODE.policy_refused, ic.PolicyRefused);
    const unknown = ic.errorFromResponse({ ok: false, error: { code: 'brand_new', message: 'm' } });
    assert.equal(unknown.constructor, ic.IntentdError);
    assert.equal(unknown.code, 'brand_new');
    assert.equal(unknown.field, null);
  });
});

describe('seen, done and forget against a real agent', () => {
  let agent;
  let client;
  before(async () => {
    agent = await new AgentProcess().start();
    client = new ic.Client({ socketPath: agent.socket, reconnectTimeoutMs: 2000 });
  });
  after(async () => {
    client.close();
    await agent.cleanup();
  });
  const mid = () => `wamid.${ref('HBgM')}`;

  test('plain seen, then duplicates; per tenant and channel', async () => {
    const m = mid();
    const first = await client.seen(T, 'whatsapp', m, { meta: { from: '5511987654321' } });
    assert.deepEqual([first.first, first.state, first.count], [true, 'seen', 1]);
    assert.ok(first.expires_at_ms >= first.first_seen_at_ms + 7 * 24 * 3600 * 1000);
    assert.equal('lease_token' in first, false);
    const again = await client.seen(T, 'whatsapp', m, { meta: { from: 'someone else' } });
    assert.deepEqual([again.first, again.state, again.count], [false, 'seen', 2]);
    assert.deepEqual(again.meta, { from: '5511987654321' });
    assert.equal((await client.seen('globex', 'whatsapp', m)).first, true);
    assert.equal((await client.seen(T, 'instagram', m)).first, true);
    const [a, b] = [mid(), mid()];
    const results = await client.seenBatch(T, 'whatsapp', [a, { messageId: b }, a]);
    assert.deepEqual(results.map((r) => [r.message_id, r.first, r.count]),
      [[a, true, 1], [b, true, 1], [a, false, 2]]);
  });

  test('a claim, its takeover, done', async () => {
    const m = mid();
    const claim = await client.seen(T, 'whatsapp', m, { leaseMs: 1000 });
    assert.deepEqual([claim.first, claim.state, claim.lease_token], [true, 'processing', 1]);
    const busy = await client.seen(T, 'whatsapp', m, { leaseMs: 1000 });
    assert.deepEqual([busy.first, busy.state], [false, 'processing']);
    assert.ok(busy.retry_after_ms > 0 && busy.retry_after_ms <= 1000);
    await sleepPast(claim.lease_until_ms);
    const again = await client.seen(T, 'whatsapp', m, { leaseMs: 60000 });
    assert.deepEqual([again.first, again.lease_token], [true, 2]);
    await assert.rejects(client.done(T, 'whatsapp', m, 1),
      (e) => e instanceof ic.LeaseLost && e.field === 'lease_token');
    assert.deepEqual(await client.done(T, 'whatsapp', m, 2), { state: 'done' });
    assert.deepEqual(await client.done(T, 'whatsapp', m, 2), { state: 'done' });
    const after = await client.seen(T, 'whatsapp', m, { leaseMs: 60000 });
    assert.deepEqual([after.first, after.state], [false, 'done']);
  });

  test('done and forget: errors, forgotten', async () => {
    const m = mid();
    await assert.rejects(client.done(T, 'whatsapp', m, 1),
      (e) => e instanceof ic.NotFound && e.field === 'message_id');
    await client.seen(T, 'whatsapp', m);
    await assert.rejects(client.done(T, 'whatsapp', m, 1),
      (e) => e instanceof ic.InvalidState && e.field === 'lease_token');
    assert.deepEqual(await client.forget(T, 'whatsapp', m), { forgotten: true });
    assert.deepEqual(await client.forget(T, 'whatsapp', m), { forgotten: false });
    assert.equal((await client.seen(T, 'whatsapp', m)).count, 1);
    await assert.rejects(client.seen(T, 'whatsapp', mid(), { leaseMs: 5 }),
      (e) => e instanceof ic.InvalidField && e.field === 'lease_ms');
  });

  test('firstSightings end to end, plain and claimed', async () => {
    const [a, b] = [mid(), mid()];
    const body = {
      object: 'whatsapp_business_account',
      entry: [{
        id: '1',
        changes: [{
          field: 'messages',
          value: {
            messages: [a, b].map((id) => ({ from: '5511987654321', id, type: 'text' })),
          },
        }],
      }],
    };
    assert.deepEqual((await ic.firstSightings(client, T, body)).map((e) => e.id), [a, b]);
    assert.deepEqual(await ic.firstSightings(client, T, body), []);
    const c = mid();
    body.entry[0].changes[0].value.messages.push({ from: '5511987654321', id: c, type: 'text' });
    const claimed = await ic.firstSightings(client, T, body, { leaseMs: 60000 });
    assert.deepEqual(claimed.map((e) => [e.id, e.leaseToken]), [[c, 1]]);
    const held = await ic.firstSightings(client, T, body, { leaseMs: 60000 });
    assert.deepEqual([held, held.inProgress.map((e) => e.id)], [[], [c]]);
    assert.deepEqual(await client.done(T, 'whatsapp', c, claimed[0].leaseToken),
      { state: 'done' });
    const stats = await client.stats();
    assert.ok(stats.seen.first >= 3 && stats.seen.duplicates >= 3, JSON.stringify(stats.seen));
  });

  test('a released claim is taken at once by the next delivery', async () => {
    const m = mid();
    const claim = await client.seen(T, 'whatsapp', m, { leaseMs: 600000 });
    const released = await client.release(T, 'whatsapp', m, claim.lease_token);
    assert.ok(released.lease_until_ms < claim.lease_until_ms);
    await client.release(T, 'whatsapp', m, claim.lease_token); // again: no change
    const again = await client.seen(T, 'whatsapp', m, { leaseMs: 600000 });
    assert.deepEqual([again.first, again.lease_token], [true, 2]);
    await assert.rejects(client.done(T, 'whatsapp', m, 1), ic.LeaseLost);
    await assert.rejects(client.release(T, 'whatsapp', m, 1), ic.LeaseLost);
    await client.done(T, 'whatsapp', m, 2);
    await assert.rejects(client.release(T, 'whatsapp', m, 2), ic.InvalidState);
  });

  test('processing: done when fn resolves, released when it rejects', async () => {
    const [ok, bad] = [mid(), mid()];
    const body = { entry: [{ changes: [{ field: 'messages', value: {
      messages: [ok, bad].map((id) => ({ from: '5511987654321', id, type: 'text' })),
    } }] }] };
    const handled = [];
    for (const event of await ic.firstSightings(client, T, body, { leaseMs: 600000 })) {
      await ic.processing(client, T, event, async (e) => {
        if (e.id === bad) throw new Error('PSP 503');
        handled.push(e.id);
      }).catch((err) => assert.equal(err.message, 'PSP 503'));
    }
    assert.deepEqual(handled, [ok]);
    // The failed one was given back: the redelivery gets it now, not in 10 minutes.
    const again = await ic.firstSightings(client, T, body, { leaseMs: 600000 });
    assert.deepEqual(again.map((e) => [e.id, e.leaseToken]), [[bad, 2]]);
    assert.equal(await ic.processing(client, T, again[0], () => 'handled'), 'handled');
    assert.equal((await client.seen(T, 'whatsapp', bad)).state, 'done');
    const plain = await ic.firstSightings(client, T, { entry: [{ changes: [{ value: {
      messages: [{ id: mid() }] } }] }] });
    await assert.rejects(ic.processing(client, T, plain[0], () => 1), TypeError);
  });

  test('bad ids are reported and the rest of the body is processed', async () => {
    const good = mid();
    const body = { entry: [{ changes: [{ field: 'messages', value: {
      messages: [{ id: '   ' }, { id: 'w'.repeat(300) }, { id: 42 }, { id: good }],
    } }] }] };
    const found = await ic.firstSightings(client, T, body);
    assert.deepEqual(found.map((e) => e.id), [good]);
    assert.deepEqual(found.rejected.map((e) => e.id), ['   ', 'w'.repeat(300), '42']);
    assert.ok(found.rejected.every((e) => e.reason));
    assert.match(found.rejected[1].reason, /256/);
    assert.deepEqual(ic.messageIds(body).map((e) => e.id), ['   ', 'w'.repeat(300), good]);
  });
});

describe('reconnect', () => {
  test('after the agent restarts, a pending request goes through', async () => {
    const agent = await new AgentProcess().start();
    const client = new ic.Client({
      socketPath: agent.socket, reconnectTimeoutMs: 15000, backoffMaxMs: 200,
    });
    try {
      const r = ref();
      const b = await client.begin(T, r, PIX, pix(r));
      assert.equal(await agent.stop(), 0);
      const restart = new Promise((resolve) => { setTimeout(resolve, 500); })
        .then(() => agent.start());
      const c = await client.complete(T, b.key, 1, { after: 'restart' });
      await restart;
      assert.equal(c.status, 'completed');
      assert.ok(client.reconnects >= 1);
      // An idle connection closed by a restart is not reused, even for amend.
      await agent.stop();
      await agent.start();
      const strict = client;
      strict.reconnectTimeoutMs = 0;
      await assert.rejects(strict.amend(T, r, PIX, pix(r, { valor: '1800.00' })),
        ic.InvalidState); // an answer from the agent, not Unavailable
    } finally {
      client.close();
      await agent.cleanup();
    }
  });

  test('Unavailable when nobody listens, after backing off', async () => {
    const client = new ic.Client({ socketPath: '/nonexistent/x.sock', reconnectTimeoutMs: 300 });
    const t0 = Date.now();
    await assert.rejects(client.ping(), ic.Unavailable);
    assert.ok(Date.now() - t0 > 50);
  });

  test('socket path from the environment', () => {
    const old = process.env.INTENTD_SOCKET;
    process.env.INTENTD_SOCKET = '/tmp/from-env.sock';
    try {
      assert.equal(new ic.Client().socketPath, '/tmp/from-env.sock');
      assert.equal(new ic.Client({ socketPath: '/x.sock' }).socketPath, '/x.sock');
      delete process.env.INTENTD_SOCKET;
      assert.equal(new ic.Client().socketPath, ic.DEFAULT_SOCKET);
    } finally {
      if (old !== undefined) process.env.INTENTD_SOCKET = old;
    }
  });
});

describe('transport against a scripted fake agent', () => {
  const servers = [];
  const dirs = [];
  after(() => {
    servers.forEach((s) => s.close());
    dirs.forEach((d) => fs.rmSync(d, { recursive: true, force: true }));
  });

  // answer(req, n) → string to send, null to stay silent, '' to hang up.
  function fake(answer) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'intentd-fake-'));
    dirs.push(dir);
    const socketPath = path.join(dir, 'fake.sock');
    const requests = [];
    const server = net.createServer((conn) => {
      let buf = '';
      conn.on('data', (d) => {
        buf += d;
        let nl;
        while ((nl = buf.indexOf('\n')) >= 0) {
          const req = JSON.parse(buf.slice(0, nl));
          buf = buf.slice(nl + 1);
          requests.push(req);
          const out = answer(req, requests.length);
          if (out === '') conn.destroy();
          else if (out !== null) conn.write(out);
        }
      });
    });
    server.listen(socketPath);
    servers.push(server);
    return { socketPath, requests };
  }
  const ok = (req, extra = {}) => `${JSON.stringify({ id: req.id, ok: true, ...extra })}\n`;

  test('timeout when the agent is silent', async () => {
    const { socketPath } = fake(() => null);
    const client = new ic.Client({ socketPath, timeoutMs: 200 });
    await assert.rejects(client.ping(), ic.Timeout);
    client.close();
  });

  test('wrong id and garbage are protocol errors', async () => {
    const a = fake(() => '{"id":999,"ok":true}\n');
    await assert.rejects(new ic.Client({ socketPath: a.socketPath }).ping(), ic.ProtocolError);
    const b = fake(() => 'hello\n');
    await assert.rejects(new ic.Client({ socketPath: b.socketPath }).ping(), ic.ProtocolError);
  });

  test('overloaded is retried with the same request', async () => {
    const f = fake((req, n) => (n < 3
      ? `${JSON.stringify({ id: req.id, ok: false, error: { code: 'overloaded', message: 'busy' } })}\n`
      : ok(req, { protocol: 1 })));
    const client = new ic.Client({ socketPath: f.socketPath, backoffInitialMs: 10 });
    assert.deepEqual(await client.ping(), { protocol: 1 });
    assert.equal(f.requests.length, 3);
    assert.equal(new Set(f.requests.map((r) => r.id)).size, 1);
    client.close();
  });

  test('amend is not resent after the connection broke', async () => {
    const f = fake(() => '');
    const client = new ic.Client({ socketPath: f.socketPath, reconnectTimeoutMs: 2000 });
    const r = ref();
    await assert.rejects(client.amend(T, r, PIX, pix(r)), (e) => e instanceof ic.Unavailable
      && /outcome/.test(e.message));
    assert.equal(f.requests.length, 1);
  });

  test('ids grow per request; concurrent callers are serialized', async () => {
    const f = fake((req) => ok(req, { op: req.op }));
    const client = new ic.Client({ socketPath: f.socketPath });
    const answers = await Promise.all([client.ping(), client.stats(), client.ping()]);
    assert.deepEqual(answers.map((a) => a.op), ['ping', 'stats', 'ping']);
    assert.deepEqual(f.requests.map((r) => r.id), [1, 2, 3]);
    client.close();
  });
});
