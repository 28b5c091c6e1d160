// The real OpenAI Agents SDK, with a scripted model from a custom model
// provider (no network): the model repeats a tool call on a later turn
// under a new call id, two identical calls in one turn, a task retried after
// a crash. One charge per invoice; the model reads a replay the second time.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { Agent, Runner, Usage } from '@openai/agents';
import { z } from 'zod';
import { Client } from 'intentd-client';
import { agentsTool } from 'intentd-agent-tools/agents';

import {
  TOOL_DESCRIPTION, TOOL_NAME, TOOL_PARAMETERS, pixChargeTool,
} from '../examples/mcp-pix-server/pix-tool.js';
import { AgentProcess, Fixture, TENANT, chargeArgs } from './helpers.js';

let callIds = 0;

/** A model response asking for tool calls, each with a fresh call id. */
function toolCalls(...argsList) {
  return argsList.map((args) => ({ type: 'function_call', callId: `call_${++callIds}`,
    name: TOOL_NAME, arguments: JSON.stringify(args), status: 'completed' }));
}

function message(text) {
  return [{ type: 'message', role: 'assistant', status: 'completed',
    content: [{ type: 'output_text', text }] }];
}

/**
 * A model that plays `turns` in order, one per getResponse (each a list of
 * output items, or a function that throws), and keeps the tool outputs it
 * was shown.
 */
class ScriptedModel {
  constructor(turns) {
    this.turns = [...turns];
    this.toolOutputs = [];
  }

  async getResponse(request) {
    const items = Array.isArray(request.input) ? request.input : [];
    this.toolOutputs = items.filter((i) => i.type === 'function_call_result')
      .map((i) => (typeof i.output === 'string' ? i.output : i.output.text));
    const turn = this.turns.shift();
    if (!turn) throw new Error('scripted model: no turn left');
    if (typeof turn === 'function') return turn();
    return { usage: new Usage(), output: turn };
  }

  // eslint-disable-next-line require-yield
  async* getStreamedResponse() { throw new Error('scripted model: no streaming'); }
}

describe('OpenAI Agents SDK function tool', () => {
  let agentProcess;
  let client;
  let fx;
  let chargeTool;

  // One run of a billing agent whose model plays `model`'s script; the
  // local context carries the authenticated tenant (the model never sees it).
  function run(model, tenantId = TENANT) {
    const runner = new Runner({ modelProvider: { getModel: () => model }, tracingDisabled: true });
    const agent = new Agent({ name: 'billing', instructions: 'Charge invoices with Pix.',
      model: 'scripted', tools: [chargeTool] });
    return runner.run(agent, 'Cobrar a fatura, por favor', { context: { tenantId } });
  }

  before(async () => {
    agentProcess = await new AgentProcess().start();
    client = new Client({ socketPath: agentProcess.socket, reconnectTimeoutMs: 2000 });
    fx = new Fixture(10);
    const guarded = pixChargeTool({ client, psp: fx.psp, invoices: fx.invoices,
      tenantOf: (runContext) => runContext?.context?.tenantId ?? null,
      leaseMs: 5000, inFlightWaitMs: 5000 });
    chargeTool = agentsTool(guarded, { name: TOOL_NAME, description: TOOL_DESCRIPTION,
      parameters: z.object(TOOL_PARAMETERS) });
  });
  after(async () => {
    client.close();
    await agentProcess.cleanup();
    fx.cleanup();
  });

  test('a call repeated on a later turn under a new call id is a replay', async () => {
    const inv = fx.invoice();
    const model = new ScriptedModel([toolCalls(chargeArgs(inv)), toolCalls(chargeArgs(inv)),
      message('Cobrança criada.')]);
    const result = await run(model);
    assert.equal(result.finalOutput, 'Cobrança criada.');
    assert.equal(model.toolOutputs.length, 2);
    assert.match(model.toolOutputs[0], /^DONE: /);
    assert.match(model.toolOutputs[1], /^ALREADY DONE \(replay\).*Do not call this tool again/s);
    assert.equal(fx.chargesOf(inv).length, 1);
  });

  test('two identical calls in one turn: one charge, one replay', async () => {
    const inv = fx.invoice();
    const model = new ScriptedModel([toolCalls(chargeArgs(inv), chargeArgs(inv)), message('ok')]);
    await run(model);
    const verdicts = model.toolOutputs.map((t) => t.split(':')[0]).sort();
    assert.deepEqual(verdicts, ['ALREADY DONE (replay)', 'DONE']);
    assert.equal(fx.chargesOf(inv).length, 1);
  });

  test('a task retried (or resumed from a checkpoint taken before the tool ran) after a crash: a replay', async () => {
    const inv = fx.invoice();
    const crashed = new ScriptedModel([toolCalls(chargeArgs(inv)), () => {
      throw new Error('worker lost after the tool ran');
    }]);
    await assert.rejects(run(crashed), /worker lost/);
    assert.equal(fx.chargesOf(inv).length, 1);

    const retried = new ScriptedModel([toolCalls(chargeArgs(inv)), message('ok')]);
    await run(retried);
    assert.match(retried.toolOutputs[0], /^ALREADY DONE \(replay\)/);
    assert.equal(fx.chargesOf(inv).length, 1);
  });

  test('changed arguments on a later turn replay the first charge, naming the fields', async () => {
    const inv = fx.invoice();
    const model = new ScriptedModel([toolCalls(chargeArgs(inv)),
      toolCalls(chargeArgs(inv, { valor: '1.800,00' })), message('ok')]);
    await run(model);
    assert.match(model.toolOutputs[1], /^ALREADY DONE \(replay\).* in: valor; the first ones stand/s);
    assert.equal(fx.chargesOf(inv)[0].valor, '180.00');
    assert.equal(fx.chargesOf(inv).length, 1);
  });

  test('the tenant comes from the run context: another tenant\'s invoice is refused', async () => {
    const inv = fx.invoice();
    const model = new ScriptedModel([toolCalls(chargeArgs(inv)), message('não achei')]);
    const result = await run(model, 'globex');
    assert.equal(result.finalOutput, 'não achei');
    assert.match(model.toolOutputs[0], /^REFUSED: there is no invoice/);
    assert.equal((await client.lookup('globex', inv, 'pix.cobranca')).found, false);
    assert.equal((await client.lookup(TENANT, inv, 'pix.cobranca')).found, false);
    assert.equal(fx.chargesOf(inv).length, 0);
  });
});
