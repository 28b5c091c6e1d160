// The example MCP server (examples/mcp-pix-server/server.js) as an MCP
// client runs it: a child process on stdio, through the real SDK. The
// client sends every call twice, and retries after the server process is
// SIGKILLed mid-call (before the PSP charged, and after it charged but
// before anyone heard back). One charge per invoice, a replay the second time.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';

import { Client as McpClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { Client } from 'intentd-client';

import { TOOL_NAME } from '../examples/mcp-pix-server/pix-tool.js';
import {
  AgentProcess, Fixture, HERE, SERVER, TENANT, callTwice, chargeArgs, textOf, until,
} from './helpers.js';

const LEASE_MS = 1500; // short, so that the retry after a SIGKILL recovers soon

describe('MCP over stdio, the example server', () => {
  let agent;
  let client;
  let fx;
  const servers = [];

  // Starts server.js through the SDK's stdio transport; `env` adds to the
  // server's environment (the fake PSP's delays).
  async function connect(env = {}) {
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [SERVER],
      env: { INTENTD_SOCKET: agent.socket, FAKE_PSP_FILE: fx.pspFile,
        PIX_INVOICES_FILE: fx.invoicesFile, PIX_TENANT: TENANT, PIX_LEASE_MS: String(LEASE_MS),
        PIX_IN_FLIGHT_WAIT_MS: '8000', ...env },
      stderr: 'pipe',
    });
    const mcp = new McpClient({ name: 'retrying-client', version: '0.0.0' });
    await mcp.connect(transport);
    const server = { mcp, transport, pid: transport.pid };
    servers.push(server);
    return server;
  }

  before(async () => {
    agent = await new AgentProcess().start();
    client = new Client({ socketPath: agent.socket, reconnectTimeoutMs: 2000 });
    fx = new Fixture(10);
  });
  after(async () => {
    for (const s of servers) await s.mcp.close().catch(() => {});
    client.close();
    await agent.cleanup();
    fx.cleanup();
  });

  test('every call sent twice: one charge, one replay', async () => {
    const { mcp } = await connect({ FAKE_PSP_DELAY_AFTER_MS: '200' });
    const inv = fx.invoice();
    const results = await callTwice(mcp, TOOL_NAME, chargeArgs(inv));
    assert.deepEqual(results.map((r) => r.structuredContent.outcome).sort(), ['executed', 'replayed']);
    const again = await callTwice(mcp, TOOL_NAME, chargeArgs(inv, { valor: '18.00' }));
    for (const r of again) {
      assert.equal(r.structuredContent.outcome, 'replayed');
      assert.deepEqual(r.structuredContent.diverged_fields, ['valor']);
    }
    assert.equal(fx.chargesOf(inv).length, 1);
  });

  for (const when of ['before', 'after']) {
    test(`SIGKILL ${when} the PSP charged, then a retry through a new server: one charge`, async () => {
      const inv = fx.invoice();
      const delay = when === 'before' ? { FAKE_PSP_DELAY_BEFORE_MS: '60000' }
        : { FAKE_PSP_DELAY_AFTER_MS: '60000' };
      const doomed = await connect(delay);
      const requestsBefore = fx.psp.requests().length;
      const pending = callTwice(doomed.mcp, TOOL_NAME, chargeArgs(inv));
      pending.catch(() => {}); // rejected below, once the server is gone
      const txids = () => fx.psp.requests().map((r) => r.txid);
      await until(() => fx.psp.requests().length > requestsBefore && (when === 'before'
        || fx.chargesOf(inv).length === 1), 10000, 'the call to reach the PSP');
      const txid = txids().at(-1);
      process.kill(doomed.pid, 'SIGKILL');
      await assert.rejects(pending); // the client never heard back

      const { mcp } = await connect(); // the MCP client restarts the server and retries
      const retried = await callTwice(mcp, TOOL_NAME, chargeArgs(inv));
      const outcomes = retried.map((r) => r.structuredContent.outcome).sort();
      if (when === 'before') {
        // The PSP never charged: one retry charges under the same txid,
        // the other waits for it and replays.
        assert.deepEqual(outcomes, ['executed', 'replayed']);
      } else {
        // The PSP had charged: found by txid, nothing charged again.
        assert.deepEqual(outcomes, ['recovered', 'replayed']);
        assert.match(textOf(retried.find((r) => r.structuredContent.outcome === 'recovered')),
          /^ALREADY DONE: .*interrupted/);
      }
      assert.ok(retried.every((r) => !r.isError && r.structuredContent.txid === txid));
      const charges = fx.chargesOf(inv);
      assert.equal(charges.length, 1);
      assert.equal(charges[0].txid, txid);

      const third = await mcp.callTool({ name: TOOL_NAME, arguments: chargeArgs(inv) });
      assert.equal(third.structuredContent.outcome, 'replayed');
      assert.match(textOf(third), /^ALREADY DONE \(replay\)/);
      assert.equal((await client.lookup(TENANT, inv, 'pix.cobranca')).action.status, 'completed');
    });
  }

  test('two servers, one per client, racing on one invoice: one charge', async () => {
    const inv = fx.invoice();
    const [a, b] = [await connect({ FAKE_PSP_DELAY_AFTER_MS: '200' }), await connect()];
    const results = await Promise.all([a, b].map((s) => callTwice(s.mcp, TOOL_NAME, chargeArgs(inv))));
    const outcomes = results.flat().map((r) => r.structuredContent.outcome);
    assert.equal(outcomes.filter((o) => o === 'executed').length, 1);
    assert.equal(outcomes.filter((o) => o === 'replayed').length, 3);
    assert.equal(fx.chargesOf(inv).length, 1);
  });

  test('the demo runs with one command and reports one charge per invoice', async () => {
    const demo = path.join(HERE, '..', 'examples', 'mcp-pix-server', 'demo.js');
    const { stdout } = await promisify(execFile)(process.execPath,
      [demo, '--intentd', agent.binary], { timeout: 30000 });
    assert.match(stdout, /^fake PSP: 1 charge for FAT-2026-000123/m);
    assert.match(stdout, /ALREADY DONE \(replay\)/);
    assert.match(stdout, /REFUSED/);
  });
});
