#!/usr/bin/env node
// An MCP server (stdio) with one tool, create_pix_charge, over a fake PSP,
// guarded by intentd: however often a client sends, retries or resumes a
// call, each invoice is charged once. README.md says how to register it.
//
// Environment: INTENTD_SOCKET (default /run/intentd/intentd.sock);
// PIX_TENANT, the tenant this server acts for (default acme: a stdio server
// runs for one user; behind an authenticating transport the tenant comes
// from the session's authInfo instead); PIX_INVOICES_FILE (the invoices,
// JSON, default two sample ones); FAKE_PSP_FILE (the fake PSP's charges,
// default $TMPDIR/intentd-fake-psp.jsonl); PIX_LEASE_MS (30000);
// PIX_IN_FLIGHT_WAIT_MS (10000). Logs go to stderr: stdout is the protocol.

import os from 'node:os';
import path from 'node:path';

import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { Client } from 'intentd-client';
import { mcpToolHandler } from 'intentd-agent-tools/mcp';

import { FakePsp } from './fake-psp.js';
import { loadInvoices } from './invoices.js';
import { TOOL_DESCRIPTION, TOOL_NAME, TOOL_PARAMETERS, pixChargeTool } from './pix-tool.js';

const env = process.env;
const serverTenant = env.PIX_TENANT || 'acme';
const pspFile = env.FAKE_PSP_FILE || path.join(os.tmpdir(), 'intentd-fake-psp.jsonl');

const client = new Client(); // INTENTD_SOCKET, else /run/intentd/intentd.sock
const guarded = pixChargeTool({
  client,
  psp: new FakePsp(pspFile),
  invoices: loadInvoices(env.PIX_INVOICES_FILE),
  // An authenticated session's tenant wins; stdio has none, so the
  // server's own configuration says whom it acts for. Never the arguments.
  tenantOf: (extra) => extra?.authInfo?.extra?.tenantId ?? serverTenant,
  leaseMs: Number(env.PIX_LEASE_MS || 30000),
  inFlightWaitMs: Number(env.PIX_IN_FLIGHT_WAIT_MS || 10000),
});

const server = new McpServer({ name: 'intentd-pix-example', version: '0.1.0' });
server.registerTool(TOOL_NAME, {
  title: 'Create a Pix charge',
  description: TOOL_DESCRIPTION,
  inputSchema: TOOL_PARAMETERS,
  annotations: { idempotentHint: true, destructiveHint: false, openWorldHint: true },
}, mcpToolHandler(guarded));

await server.connect(new StdioServerTransport());
console.error(`intentd-pix-example: serving ${TOOL_NAME} on stdio for tenant ${serverTenant}; `
  + `intentd at ${client.socketPath}; fake PSP charges in ${pspFile}`);

// The client closing our stdin, or a signal, ends the server (the intentd
// connection would keep the process alive otherwise).
async function shutdown() {
  await server.close();
  client.close();
  process.exit(0);
}
process.stdin.on('end', shutdown);
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, shutdown);
