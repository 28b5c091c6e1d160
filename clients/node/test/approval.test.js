// Approval above the policy's threshold, through a real agent: the action
// helper throws PendingApproval without running the call until an admin
// approves; a denial replays failed; the client's admin calls.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, describe, test } from 'node:test';

import * as ic from '../index.js';
import { AgentProcess, pix, ref } from './agent-process.js';

const T = 'acme';
const PIX = 'pix.cobranca';

describe('approval above the threshold', () => {
  let agent;
  let client;
  before(async () => {
    agent = new AgentProcess();
    fs.writeFileSync(agent.config, JSON.stringify({
      policy: { 'pix.cobranca': { money: { valor: { approval_above: '1000.00' } } } },
    }));
    await agent.start();
    client = new ic.Client({ socketPath: agent.socket });
  });
  after(async () => {
    client.close();
    await agent.cleanup();
  });

  test('a pending intent never runs the call until approved', async () => {
    const r = ref();
    let calls = 0;
    const charge = async (act) => { calls += 1; return { txid: act.txid }; };
    for (let i = 0; i < 2; i += 1) {
      await assert.rejects(client.action(T, r, PIX, pix(r, { valor: '1800.00' }), charge),
        (err) => err instanceof ic.PendingApproval && /approval_above/.test(err.reason)
          && err.approval.state === 'pending');
    }
    assert.equal(calls, 0);
    const waiting = (await client.pending(T)).filter((i) => i.intent_ref === r);
    assert.equal(waiting.length, 1);
    assert.deepEqual(waiting[0].money, { valor: '1800.00' });
    const approved = await client.approve(T, r, PIX, { note: 'called the customer' });
    assert.equal(approved.approval.state, 'approved');
    const act = await client.action(T, r, PIX, pix(r, { valor: '1800.00' }), charge);
    assert.equal(calls, 1);
    assert.equal(act.amountText('valor'), '1800.00');
    assert.equal((await client.lookup(T, r, PIX)).action.status, 'completed');
  });

  test('a denied intent replays failed', async () => {
    const r = ref();
    const charge = async () => { throw new Error('must not run'); };
    await assert.rejects(client.action(T, r, PIX, pix(r, { valor: '5000.00' }), charge),
      ic.PendingApproval);
    const denied = await client.deny(T, r, PIX, { note: 'not our customer' });
    assert.equal(denied.action.status, 'failed');
    const act = await client.action(T, r, PIX, pix(r, { valor: '5000.00' }), charge);
    assert.equal(act.replayed, true);
    assert.equal(act.failed, true);
    assert.equal(act.error.code, 'denied');
    await assert.rejects(client.approve(T, r, PIX), ic.InvalidState);
  });
});
