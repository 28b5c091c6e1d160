// The action helper against a real agent: its decisions and outcomes.
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';

import * as ic from '../index.js';
import { AgentProcess, pix, ref } from './agent-process.js';

const T = 'acme';
const PIX = 'pix.cobranca';

/** Counts real executions per key and replays the first answer. */
class FakeProvider {
  constructor() {
    this.calls = [];
    this.executed = new Map();
    this.delayMs = 0;
  }

  async charge(key, txid, amount) {
    this.calls.push(key);
    const first = !this.executed.has(key);
    if (first) {
      this.executed.set(key, { charge_id: `ch_${this.executed.size + 1}`, txid, amount });
    }
    await sleep(this.delayMs);
    return { ...this.executed.get(key), replayed: !first };
  }
}

describe('action helper', () => {
  let agent;
  let client;
  let psp;
  let charge;
  before(async () => {
    agent = await new AgentProcess().start();
    client = new ic.Client({ socketPath: agent.socket, reconnectTimeoutMs: 2000 });
  });
  after(async () => {
    client.close();
    await agent.cleanup();
  });
  beforeEach(() => {
    psp = new FakeProvider();
    charge = (act) => psp.charge(act.key, act.txid, act.amountText('valor'));
  });

  test('execute, then replay without calling', async () => {
    const r = ref();
    const first = await client.action(T, r, PIX, pix(r), charge);
    assert.equal(first.decision, 'execute');
    assert.equal(first.status, 'completed');
    assert.equal(first.response.charge_id, 'ch_1');
    const second = await client.action(T, r, PIX, pix(r, { valor: '1800.00' }), charge);
    assert.equal(second.replayed, true);
    assert.deepEqual(second.response, first.response);
    assert.deepEqual(second.divergedFields, ['valor']);
    assert.equal(second.payload.valor, '18000');
    assert.equal(psp.calls.length, 1);
  });

  test('the provider gets the frozen amount in units and the whole first input', async () => {
    const r = ref();
    const first = { ...pix(r, { valor: 180 }), descricao: 'Pedido 42' }; // 180 is R$ 180,00
    const act = await client.action(T, r, PIX, first, charge);
    assert.equal(psp.executed.get(act.key).amount, '180.00');
    assert.equal(act.amountText('valor'), '180.00');
    assert.equal(act.amountCents('valor'), 18000);
    assert.equal(act.payload.valor, '18000'); // the key input, in cents
    assert.deepEqual(act.input, first);
    assert.deepEqual(act.pixKeyTypes, { chave_pix_destino: 'cpf' });
    assert.throws(() => act.amountText('cliente_id'), /valor/);
    // A recovering attempt with another extraction acts on the first one.
    const r2 = ref();
    await client.begin(T, r2, PIX, { ...pix(r2), descricao: 'first' }, { leaseMs: 1000 });
    const got = {};
    const rec = await client.action(T, r2, PIX, { ...pix(r2, { valor: '180.0' }), descricao: 'second' },
      async (a) => { got.descricao = a.input.descricao; got.amount = a.amountText('valor'); },
      { pollMaxMs: 200 });
    assert.equal(rec.decision, 'recover');
    assert.deepEqual(got, { descricao: 'first', amount: '180.00' });
  });

  test('a payload function runs only when the intent is new', async () => {
    const r = ref();
    let calls = 0;
    const extract = async () => {
      calls += 1;
      return pix(r, { valor: String(180 + calls) }); // every model call differs
    };
    const a = await client.action(T, r, PIX, extract, charge);
    assert.deepEqual([a.decision, a.extracted, calls], ['execute', true, 1]);
    assert.equal(a.amountText('valor'), '181.00');
    for (let i = 0; i < 3; i += 1) {
      const b = await client.action(T, r, PIX, extract, charge);
      assert.deepEqual([b.replayed, b.extracted, b.input.valor], [true, false, '181']);
    }
    assert.equal(calls, 1);
    assert.equal(psp.calls.length, 1);
    // A failed extraction freezes nothing; a plain function works too; a
    // function that returns no object is a clear error.
    const r2 = ref();
    await assert.rejects(client.action(T, r2, PIX, () => { throw new Error('model timed out'); },
      charge), /model timed out/);
    assert.equal((await client.lookup(T, r2, PIX)).found, false);
    await assert.rejects(client.action(T, r2, PIX, () => 'text', charge), TypeError);
    const c = await client.action(T, r2, PIX, () => pix(r2), charge);
    assert.equal(c.extracted, true);
  });

  test('in_flight waits for the holder, renewing its lease, then replays', async () => {
    const r = ref();
    const other = new ic.Client({ socketPath: agent.socket });
    psp.delayMs = 2200; // more than two 1 s leases: only renewal keeps it
    const holder = other.action(T, r, PIX, pix(r), charge, { leaseMs: 1000 });
    while (psp.calls.length === 0) await sleep(10);
    const waiter = await client.action(T, r, PIX, pix(r), charge, { pollMaxMs: 100 });
    const held = await holder;
    other.close();
    assert.equal(held.leaseToken, 1);
    assert.equal(held.leaseLost, false);
    assert.equal(waiter.replayed, true);
    assert.ok(waiter.waitedPolls >= 3);
    assert.deepEqual(waiter.response, held.response);
    assert.equal(psp.calls.length, 1);
  });

  test('StillInFlight at the deadline', async () => {
    const r = ref();
    await client.begin(T, r, PIX, pix(r), { leaseMs: 60000 });
    await assert.rejects(client.action(T, r, PIX, pix(r), charge, { waitMs: 300, pollMaxMs: 50 }),
      (e) => e instanceof ic.StillInFlight && e.retryAfterMs > 50000 && e.code === 'in_flight');
    assert.equal(psp.calls.length, 0);
  });

  test('recover after a dead worker repeats the call with the same key', async () => {
    const r = ref();
    const dead = await client.begin(T, r, PIX, pix(r), { leaseMs: 1000 });
    await psp.charge(dead.key, dead.txid, '180.00'); // it acted, then died
    const act = await client.action(T, r, PIX, pix(r), charge, { pollMaxMs: 200 });
    assert.equal(act.decision, 'recover');
    assert.equal(act.recovering, true);
    assert.equal(act.previousLeaseToken, 1);
    assert.equal(act.leaseToken, 2);
    assert.equal(act.response.replayed, true);
    assert.equal(psp.executed.size, 1);
  });

  test('Retriable releases and rethrows; Terminal is stored and replayed', async () => {
    const r = ref();
    await assert.rejects(client.action(T, r, PIX, pix(r), async () => {
      throw new ic.Retriable('503 before acting', { error: { http: 503 } });
    }), ic.Retriable);
    assert.equal((await client.lookup(T, r, PIX)).action.status, 'released');
    const done = await client.action(T, r, PIX, pix(r), async () => {
      throw new ic.Terminal('declined', { error: { reason: 'blocked' } });
    });
    assert.equal(done.failed, true);
    assert.equal(done.attempt, 2);
    assert.deepEqual(done.error, { reason: 'blocked' });
    const again = await client.action(T, r, PIX, pix(r), charge);
    assert.equal(again.replayed && again.failed, true);
    assert.deepEqual(again.error, { reason: 'blocked' });
    assert.equal(psp.calls.length, 0);
  });

  test('custom retriable classes', async () => {
    const r = ref();
    class PspDown extends Error {}
    await assert.rejects(client.action(T, r, PIX, pix(r), async () => { throw new PspDown('x'); },
      { retriable: [PspDown] }), PspDown);
    assert.equal((await client.lookup(T, r, PIX)).action.status, 'released');
  });

  test('an unknown error leaves the outcome open and recoverable soon', async () => {
    const r = ref();
    await assert.rejects(client.action(T, r, PIX, pix(r), async (act) => {
      await psp.charge(act.key, act.txid, act.amountText('valor'));
      throw new Error('socket reset while reading the PSP answer');
    }, { leaseMs: 600000 }), /socket reset/);
    const st = (await client.lookup(T, r, PIX)).action;
    assert.equal(st.status, 'started');
    assert.ok(st.lease_until_ms - Date.now() < 1500);
    const act = await client.action(T, r, PIX, pix(r), charge, { pollMaxMs: 200 });
    assert.equal(act.decision, 'recover');
    assert.equal(psp.executed.size, 1);
  });

  test('undefined result completes with null; bad options are refused', async () => {
    const r = ref();
    const act = await client.action(T, r, PIX, pix(r), async () => {});
    assert.equal(act.status, 'completed');
    assert.equal((await client.begin(T, r, PIX)).response, null);
    await assert.rejects(client.action(T, ref(), PIX, {}, charge, { leaseMs: 10 }), RangeError);
    await assert.rejects(client.action(T, ref(), PIX, {}, null), TypeError);
  });
});
