// The guard against a real agent: each begin decision and provider ending
// becomes the outcome the model is told, and the fake PSP never holds two
// charges of one invoice.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';

import { Client } from 'intentd-client';
import { AnchorRefused, Retriable, Terminal, frozenInput, guardTool } from 'intentd-agent-tools';

import { FakePsp } from '../examples/mcp-pix-server/fake-psp.js';
import { pixChargeTool } from '../examples/mcp-pix-server/pix-tool.js';
import { AgentProcess, Fixture, TENANT, chargeArgs, until } from './helpers.js';

const PIX = 'pix.cobranca';

describe('guarded tool', () => {
  let agent;
  let client;
  let fx;
  const tenantOf = () => TENANT;
  const pixTool = (options = {}) => pixChargeTool({ client, psp: options.psp ?? fx.psp,
    invoices: fx.invoices, tenantOf, leaseMs: 1000, inFlightWaitMs: 5000, ...options });
  // A tool whose provider call is `call`, anchored on the invoice id.
  const customTool = (call, options = {}) => guardTool({ client, actionType: PIX, call,
    anchor: (args) => ({ tenantId: TENANT, intentRef: args.invoice_id,
      payload: { cliente_id: 'c-1', valor: args.valor, chave_pix_destino: args.chave_pix_destino } }),
    leaseMs: 1000, inFlightWaitMs: 5000, ...options });

  before(async () => {
    agent = await new AgentProcess().start();
    client = new Client({ socketPath: agent.socket, reconnectTimeoutMs: 2000 });
    fx = new Fixture(30);
  });
  after(async () => {
    client.close();
    await agent.cleanup();
    fx.cleanup();
  });

  test('executes once, then replays, naming the fields that differed', async () => {
    const inv = fx.invoice();
    const tool = pixTool();
    const first = await tool.run(chargeArgs(inv), {});
    assert.equal(first.outcome, 'executed');
    assert.equal(first.isError, false);
    assert.equal(first.replay, false);
    assert.match(first.text, /^DONE: pix\.cobranca for FAT-/);
    assert.equal(first.result.txid, first.txid);
    assert.equal(first.txid.length, 35);

    const again = await tool.run(chargeArgs(inv, { valor: '1800.00' }), {});
    assert.equal(again.outcome, 'replayed');
    assert.equal(again.replay, true);
    assert.equal(again.isError, false);
    assert.deepEqual(again.result, first.result);
    assert.deepEqual(again.divergedFields, ['valor']);
    assert.match(again.text, /^ALREADY DONE \(replay\)/);
    assert.match(again.text, /differ .* in: valor/);
    assert.match(again.text, /Do not call this tool again/);
    const charges = fx.chargesOf(inv);
    assert.equal(charges.length, 1);
    assert.equal(charges[0].valor, '180.00'); // the arguments as the model wrote them, not cents
  });

  test('a refused anchor freezes nothing and charges nothing', async () => {
    const tool = pixTool();
    const out = await tool.run(chargeArgs('FAT-0000-NOPE'), {});
    assert.equal(out.outcome, 'refused');
    assert.equal(out.isError, true);
    assert.equal(out.error.code, 'anchor_refused');
    assert.match(out.text, /^REFUSED: there is no invoice "FAT-0000-NOPE"/);
    assert.equal((await client.lookup(TENANT, 'FAT-0000-NOPE', PIX)).found, false);
    assert.equal(fx.chargesOf('FAT-0000-NOPE').length, 0);
    assert.equal(fx.psp.requests().filter((r) => r.txid === out.txid).length, 0);
  });

  test('a broken anchor function is a tool error, not a crash', async () => {
    const tool = guardTool({ client, actionType: PIX, call: async () => 'x',
      anchor: () => ({ tenantId: TENANT }) });
    const out = await tool.run({}, {});
    assert.equal(out.outcome, 'error');
    assert.equal(out.error.code, 'anchor_error');
    assert.match(out.text, /Do not retry/);
  });

  test('a duplicate call waits for the first and replays it', async () => {
    const inv = fx.invoice();
    const slow = pixTool({ psp: new FakePsp(fx.pspFile, { delayAfterMs: 400 }) });
    const [a, b] = await Promise.all([slow.run(chargeArgs(inv), {}), slow.run(chargeArgs(inv), {})]);
    const outcomes = [a.outcome, b.outcome].sort();
    assert.deepEqual(outcomes, ['executed', 'replayed']);
    assert.deepEqual(a.result, b.result);
    assert.equal(fx.chargesOf(inv).length, 1);
  });

  test('in_progress after the bounded wait, without calling the provider', async () => {
    const inv = fx.invoice();
    await client.begin(TENANT, inv, PIX, { cliente_id: 'c', valor: '180.00',
      chave_pix_destino: '111.222.333-96' }, { leaseMs: 60000 });
    const requestsBefore = fx.psp.requests().length;
    const started = Date.now();
    const out = await pixTool({ inFlightWaitMs: 300 }).run(chargeArgs(inv), {});
    assert.ok(Date.now() - started < 3000);
    assert.equal(out.outcome, 'in_progress');
    assert.equal(out.isError, false);
    assert.equal(out.txid.length, 35);
    assert.match(out.text, /^IN PROGRESS: .*Do not retry/);
    assert.equal(fx.psp.requests().length, requestsBefore);
  });

  test('recover asks the provider by txid first: a charge made before a crash is returned', async () => {
    const inv = fx.invoice();
    const dead = await client.begin(TENANT, inv, PIX, { cliente_id: fx.invoices.find(TENANT, inv).cliente_id,
      valor: '180.00', chave_pix_destino: '111.222.333-96' }, { leaseMs: 1000 });
    await fx.psp.createCharge({ txid: dead.txid, valor: '180.00', chave: 'k', invoiceId: inv });
    const out = await pixTool().run(chargeArgs(inv), {}); // waits out the dead lease
    assert.equal(out.outcome, 'recovered');
    assert.equal(out.replay, true);
    assert.equal(out.result.txid, dead.txid);
    assert.match(out.text, /^ALREADY DONE: .*interrupted/);
    assert.equal(fx.chargesOf(inv).length, 1);
    assert.equal((await pixTool().run(chargeArgs(inv), {})).outcome, 'replayed');
  });

  test('recover without a charge at the provider calls it once, under the same txid', async () => {
    const inv = fx.invoice();
    const dead = await client.begin(TENANT, inv, PIX, { cliente_id: fx.invoices.find(TENANT, inv).cliente_id,
      valor: '180.00', chave_pix_destino: '111.222.333-96' }, { leaseMs: 1000 });
    const out = await pixTool().run(chargeArgs(inv), {});
    assert.equal(out.outcome, 'executed');
    assert.equal(out.recovering, true);
    assert.match(out.text, /earlier attempt had been interrupted/);
    assert.deepEqual(fx.chargesOf(inv).map((c) => c.txid), [dead.txid]);
  });

  test('Retriable releases (may retry); Terminal is stored and replayed as failed', async () => {
    const inv = fx.invoice();
    const released = await customTool(async () => {
      throw new Retriable('PSP answered 503 before acting', { error: { http: 503 } });
    }).run(chargeArgs(inv), {});
    assert.equal(released.outcome, 'released');
    assert.equal(released.isError, true);
    assert.match(released.text, /^NOT DONE: .*You may call this tool again/);
    assert.equal((await client.lookup(TENANT, inv, PIX)).action.status, 'released');

    const failed = await customTool(async () => {
      throw new Terminal('declined', { error: { reason: 'chave bloqueada' } });
    }).run(chargeArgs(inv), {});
    assert.equal(failed.outcome, 'failed');
    assert.equal(failed.replay, false);
    assert.deepEqual(failed.error, { reason: 'chave bloqueada' });
    assert.match(failed.text, /^FAILED: .*Do not retry/);

    const again = await customTool(async () => assert.fail('provider called after a terminal failure'))
      .run(chargeArgs(inv), {});
    assert.equal(again.outcome, 'failed');
    assert.equal(again.replay, true);
    assert.match(again.text, /^FAILED EARLIER \(replay\)/);
  });

  test('an unknown provider ending is reported; the next call recovers without charging again', async () => {
    const inv = fx.invoice();
    const out = await pixTool({ psp: { createCharge: async (c) => {
      await fx.psp.createCharge(c);
      throw new Error('socket hang up reading the PSP answer');
    } } }).run(chargeArgs(inv), {});
    assert.equal(out.outcome, 'unknown');
    assert.equal(out.isError, true);
    assert.match(out.text, /^OUTCOME UNKNOWN: .*safe: it resumes this same action/);
    const next = await pixTool().run(chargeArgs(inv), {});
    assert.equal(next.outcome, 'recovered');
    assert.equal(fx.chargesOf(inv).length, 1);
  });

  test('intentd refusing the arguments is a tool error with its code and field', async () => {
    const inv = fx.invoice();
    const out = await pixTool().run(chargeArgs(inv, { chave_pix_destino: '111.222.333-44' }), {});
    assert.equal(out.outcome, 'error');
    assert.equal(out.isError, true);
    assert.equal(out.error.code, 'invalid_field');
    assert.equal(out.error.field, 'chave_pix_destino');
    assert.match(out.text, /^ERROR \(invalid_field on chave_pix_destino\): .*Correct that argument/);
    assert.equal((await client.lookup(TENANT, inv, PIX)).found, false);
    assert.equal(fx.chargesOf(inv).length, 0);
  });

  test('a result intentd cannot store: done, said so; the next call does not charge again', async () => {
    const inv = fx.invoice();
    const out = await customTool(async (input, info) => {
      await fx.psp.createCharge({ txid: info.txid, valor: info.amountText('valor'), chave: 'k',
        invoiceId: inv });
      return { charge_id: 'ch_big', raw: 'x'.repeat(40000) }; // over complete's 32 KiB
    }, { status: (info) => fx.psp.findCharge(info.txid) }).run(chargeArgs(inv), {});
    assert.equal(out.outcome, 'executed');
    assert.equal(out.isError, false);
    assert.equal(out.recorded, false);
    assert.equal(out.error.code, 'invalid_field');
    assert.match(out.text, /intentd could not record it: invalid_field; calling again resumes/);
    const next = await customTool(async () => assert.fail('charged again'),
      { status: (info) => fx.psp.findCharge(info.txid), leaseMs: 1000, inFlightWaitMs: 40000 })
      .run(chargeArgs(inv), {});
    assert.equal(next.outcome, 'recovered');
    assert.equal(fx.chargesOf(inv).length, 1);
  });

  test('an unreachable agent is a tool error; nothing is charged', async () => {
    const gone = new Client({ socketPath: `${agent.dir}/nobody.sock`, reconnectTimeoutMs: 0 });
    const inv = fx.invoice();
    const out = await pixChargeTool({ client: gone, psp: fx.psp, invoices: fx.invoices, tenantOf })
      .run(chargeArgs(inv), {});
    assert.equal(out.outcome, 'error');
    assert.equal(out.error.code, 'unavailable');
    assert.match(out.text, /Try again in a little while/);
    assert.equal(fx.chargesOf(inv).length, 0);
  });

  test('diverged arguments on a fresh grant, and no frozen input from the agent: no call', async () => {
    const inv = fx.invoice();
    await customTool(async () => { throw new Retriable('503'); }).run(chargeArgs(inv), {});
    const calls = [];
    const out = await customTool(async (input) => { calls.push(input); return 'charged'; })
      .run(chargeArgs(inv, { valor: '999.00' }), {});
    if (out.outcome === 'executed') {
      // An agent that returns `input`: the frozen arguments were used.
      assert.equal(calls[0].valor, '180.00');
    } else {
      assert.equal(out.outcome, 'error');
      assert.equal(out.error.code, 'frozen_input_unavailable');
      assert.match(out.text, /Call again with the arguments first used/);
      assert.deepEqual(calls, []);
      assert.equal((await client.lookup(TENANT, inv, PIX)).action.status, 'released');
    }
  });

  test('the provider gets the frozen input when the agent returns it, not this call\'s arguments', async () => {
    // A stand-in for an agent that answers begin with `input` (the protocol
    // change of the other issue): only the members runAction reads.
    const frozen = { cliente_id: 'c-1', valor: '180.00', chave_pix_destino: '111.222.333-96', nota: 'x' };
    const stub = {
      begin: async () => ({ decision: 'execute', key: 'k'.repeat(64), txid: 'k'.repeat(35),
        payload: { valor: '18000' }, input: frozen, diverged: true, diverged_fields: ['valor'],
        attempt: 2, lease_token: 2, lease_until_ms: Date.now() + 60000 }),
      complete: async () => ({ status: 'completed' }),
      renew: async () => ({ lease_until_ms: Date.now() + 60000 }),
    };
    const seen = [];
    const out = await guardTool({ client: stub, actionType: PIX,
      anchor: (args) => ({ tenantId: TENANT, intentRef: 'FAT-1', payload: args }),
      call: async (input) => { seen.push(input); return { ok: 1 }; } })
      .run({ cliente_id: 'c-1', valor: '999.00', chave_pix_destino: '111.222.333-96' }, {});
    assert.equal(out.outcome, 'executed');
    assert.deepEqual(seen, [frozen]);
    assert.match(out.text, /differed .* in: valor; the first ones were used/);
  });

  test('frozenInput: input first, then this call\'s payload unless it diverged; never payload', () => {
    const mine = { valor: '1.00' };
    assert.deepEqual(frozenInput({ input: { valor: '2.00' }, payload: { valor: '200' } }, mine),
      { input: { valor: '2.00' }, source: 'intentd' });
    assert.deepEqual(frozenInput({ payload: { valor: '100' }, diverged: false }, mine),
      { input: mine, source: 'request' });
    assert.equal(frozenInput({ payload: { valor: '200' }, diverged: true }, mine), null);
    assert.equal(frozenInput({ input: [1], diverged: true }, mine), null);
  });

  test('the anchor gets the server-side context; AnchorRefused is the refusal', async () => {
    const contexts = [];
    const tool = guardTool({ client, actionType: PIX, call: async () => 'never',
      anchor: (args, context) => {
        contexts.push(context);
        throw new AnchorRefused('invoice of another tenant');
      } });
    const out = await tool.run({ invoice_id: 'x' }, { tenant: 'other' });
    assert.deepEqual(contexts, [{ tenant: 'other' }]);
    assert.equal(out.outcome, 'refused');
    assert.equal(out.text, 'REFUSED: invoice of another tenant. Nothing was done.');
  });

  test('a lease renewed through a long provider call keeps a duplicate waiting', async () => {
    const inv = fx.invoice();
    // The call outlasts its 2 s lease: only renewals (every 667 ms) keep the
    // duplicate from taking the action over.
    const slow = pixTool({ psp: new FakePsp(fx.pspFile, { delayAfterMs: 2500 }), leaseMs: 2000 });
    const first = slow.run(chargeArgs(inv), {});
    await until(() => fx.chargesOf(inv).length === 1, 5000, 'the first charge');
    await sleep(50);
    const second = await pixTool().run(chargeArgs(inv), {});
    assert.equal((await first).outcome, 'executed');
    assert.equal(second.outcome, 'replayed');
    assert.equal(fx.chargesOf(inv).length, 1);
  });
});
