// The real MCP SDK, client and server in one process (in-memory transport):
// a client that sends every call twice, retries with changed arguments and
// names invoices the server does not have. One charge per invoice.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { Client as McpClient } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { Client } from 'intentd-client';
import { mcpToolHandler } from 'intentd-agent-tools/mcp';

import { FakePsp } from '../examples/mcp-pix-server/fake-psp.js';
import {
  TOOL_DESCRIPTION, TOOL_NAME, TOOL_PARAMETERS, pixChargeTool,
} from '../examples/mcp-pix-server/pix-tool.js';
import { AgentProcess, Fixture, TENANT, callTwice, chargeArgs, textOf } from './helpers.js';

/** An in-memory MCP session whose every request carries authInfo of
 *  `tenantId`, as an authenticating transport would (the anchor reads it). */
async function session(guarded, tenantId) {
  const server = new McpServer({ name: 'test-pix', version: '0.0.0' });
  server.registerTool(TOOL_NAME, { description: TOOL_DESCRIPTION, inputSchema: TOOL_PARAMETERS },
    mcpToolHandler(guarded));
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  const send = clientSide.send.bind(clientSide);
  const authInfo = { token: `token-of-${tenantId}`, clientId: 'test', scopes: [], extra: { tenantId } };
  clientSide.send = (message, options) => send(message, { ...options, authInfo });
  await server.connect(serverSide);
  const mcp = new McpClient({ name: 'duplicating-client', version: '0.0.0' });
  await mcp.connect(clientSide);
  return { mcp, close: async () => { await mcp.close(); await server.close(); } };
}

describe('MCP tools/call, in memory', () => {
  let agent;
  let client;
  let fx;
  let mcp;
  let sessions;

  before(async () => {
    agent = await new AgentProcess().start();
    client = new Client({ socketPath: agent.socket, reconnectTimeoutMs: 2000 });
    fx = new Fixture(10);
    // A PSP slow enough that the duplicate arrives while the first call is
    // still at the provider.
    const guarded = pixChargeTool({ client, psp: new FakePsp(fx.pspFile, { delayAfterMs: 300 }),
      invoices: fx.invoices, leaseMs: 5000, inFlightWaitMs: 5000,
      tenantOf: (extra) => extra?.authInfo?.extra?.tenantId ?? null });
    sessions = [await session(guarded, TENANT), await session(guarded, 'globex')];
    mcp = sessions[0].mcp;
  });
  after(async () => {
    for (const s of sessions) await s.close();
    client.close();
    await agent.cleanup();
    fx.cleanup();
  });

  test('a call sent twice at once charges once; one answer is a replay', async () => {
    const inv = fx.invoice();
    const [a, b] = await callTwice(mcp, TOOL_NAME, chargeArgs(inv));
    const outcomes = [a, b].map((r) => r.structuredContent.outcome).sort();
    assert.deepEqual(outcomes, ['executed', 'replayed']);
    const replay = [a, b].find((r) => r.structuredContent.replay);
    assert.equal(replay.isError, false);
    assert.match(textOf(replay), /^ALREADY DONE \(replay\)/);
    assert.match(textOf(replay), /Do not call this tool again for FAT-/);
    assert.deepEqual(a.structuredContent.result, b.structuredContent.result);
    assert.equal(fx.chargesOf(inv).length, 1);
    // A later duplicate pair: both replays.
    const later = await callTwice(mcp, TOOL_NAME, chargeArgs(inv));
    assert.deepEqual(later.map((r) => r.structuredContent.outcome), ['replayed', 'replayed']);
    assert.equal(fx.chargesOf(inv).length, 1);
  });

  test('a retry with changed arguments replays the first charge and names the fields', async () => {
    const inv = fx.invoice();
    const [first] = await callTwice(mcp, TOOL_NAME, chargeArgs(inv));
    const retried = await callTwice(mcp, TOOL_NAME, chargeArgs(inv,
      { valor: '1800.00', chave_pix_destino: 'pagador@example.com' }));
    for (const r of retried) {
      assert.equal(r.isError, false);
      assert.equal(r.structuredContent.outcome, 'replayed');
      assert.deepEqual(r.structuredContent.diverged_fields, ['valor', 'chave_pix_destino']);
      assert.match(textOf(r), /in: valor, chave_pix_destino; the first ones stand/);
      assert.deepEqual(r.structuredContent.result, first.structuredContent.result);
    }
    const charges = fx.chargesOf(inv);
    assert.equal(charges.length, 1);
    assert.equal(charges[0].valor, '180.00');
  });

  test('an invoice the server does not have is a tool error; nothing is frozen or charged', async () => {
    const results = await callTwice(mcp, TOOL_NAME, chargeArgs('FAT-9999-000001'));
    for (const r of results) {
      assert.equal(r.isError, true);
      assert.equal(r.structuredContent.outcome, 'refused');
      assert.equal(r.structuredContent.error.code, 'anchor_refused');
      assert.match(textOf(r), /^REFUSED: there is no invoice "FAT-9999-000001"/);
    }
    assert.equal((await client.lookup(TENANT, 'FAT-9999-000001', 'pix.cobranca')).found, false);
    assert.equal(fx.chargesOf('FAT-9999-000001').length, 0);
  });

  test('intentd errors come back as tool errors with the code; the server keeps serving', async () => {
    const inv = fx.invoice();
    const [r] = await callTwice(mcp, TOOL_NAME, chargeArgs(inv, { valor: 'cento e oitenta' }));
    assert.equal(r.isError, true);
    assert.equal(r.structuredContent.outcome, 'error');
    assert.equal(r.structuredContent.error.code, 'invalid_field');
    assert.equal(r.structuredContent.error.field, 'valor');
    assert.match(textOf(r), /^ERROR \(invalid_field on valor\)/);
    const ok = await mcp.callTool({ name: TOOL_NAME, arguments: chargeArgs(inv) });
    assert.equal(ok.structuredContent.outcome, 'executed');
    assert.equal(fx.chargesOf(inv).length, 1);
    assert.ok((await mcp.listTools()).tools.some((t) => t.name === TOOL_NAME));
  });

  test('the tenant is the session\'s: another tenant naming this invoice is refused', async () => {
    const inv = fx.invoice();
    const [r] = await callTwice(sessions[1].mcp, TOOL_NAME, chargeArgs(inv));
    assert.equal(r.structuredContent.outcome, 'refused');
    assert.equal((await client.lookup('globex', inv, 'pix.cobranca')).found, false);
    assert.equal((await client.lookup(TENANT, inv, 'pix.cobranca')).found, false);
    assert.equal(fx.chargesOf(inv).length, 0);
  });
});
