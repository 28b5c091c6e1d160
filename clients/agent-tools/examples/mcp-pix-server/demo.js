#!/usr/bin/env node
// One command to see the example work: starts a private intentd agent (or
// uses a running one), runs server.js as an MCP client runs it (stdio,
// the official SDK), and sends what duplicating clients send: a call twice
// at once, a retry with a changed amount, an invoice that does not exist.
// Then prints what the fake PSP holds.
//
//   node examples/mcp-pix-server/demo.js --intentd build/agent/intentd
//   INTENTD_SOCKET=/run/intentd/intentd.sock node examples/mcp-pix-server/demo.js
//
// With a running agent, a second run replays the first run's charge.

import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import { Client as McpClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { Client } from 'intentd-client';

import { FakePsp } from './fake-psp.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const INVOICE = 'FAT-2026-000123';
const ARGS = { invoice_id: INVOICE, valor: '180.00', chave_pix_destino: '111.222.333-96' };

// A private agent in a temporary folder, with a fresh development secret.
async function startAgent(binary, dir) {
  fs.accessSync(binary, fs.constants.X_OK); // a clear error for a wrong path
  const socket = path.join(dir, 'intentd.sock');
  fs.writeFileSync(path.join(dir, 'intentd.json'), '{}\n');
  const proc = spawn(binary, ['serve', '--socket', socket, '--data-dir', path.join(dir, 'data'),
    '--config', path.join(dir, 'intentd.json')], {
    env: { ...process.env, IDEMPOTENCY_HMAC_KEY: randomBytes(32).toString('hex') },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let log = '';
  proc.stderr.on('data', (d) => { log += d; });
  proc.on('error', (err) => { log += `${err.message}\n`; });
  const probe = new Client({ socketPath: socket, reconnectTimeoutMs: 15000 });
  try {
    await probe.ping();
  } catch (err) {
    proc.kill('SIGKILL');
    throw new Error(`the agent did not start: ${err.message}\n${log}`);
  } finally {
    probe.close();
  }
  return { proc, socket };
}

function firstLine(result) {
  return result.content[0].text.split('\n')[0];
}

async function main() {
  const { values } = parseArgs({ options: { intentd: { type: 'string' } } });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'intentd-mcp-demo-'));
  let agent = null;
  let mcp = null;
  try {
    if (values.intentd) agent = await startAgent(values.intentd, dir);
    else if (!process.env.INTENTD_SOCKET) {
      throw new Error('give --intentd PATH (a private agent) or INTENTD_SOCKET (a running one)');
    }
    const socket = agent ? agent.socket : process.env.INTENTD_SOCKET;
    const pspFile = path.join(dir, 'psp.jsonl');
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [path.join(HERE, 'server.js')],
      env: { ...(socket ? { INTENTD_SOCKET: socket } : {}), FAKE_PSP_FILE: pspFile,
        FAKE_PSP_DELAY_AFTER_MS: '300' },
      stderr: 'ignore',
    });
    mcp = new McpClient({ name: 'intentd-demo', version: '0.1.0' });
    await mcp.connect(transport);
    const call = (args) => mcp.callTool({ name: 'create_pix_charge', arguments: args });

    console.log(`create_pix_charge ${INVOICE}, sent twice at once:`);
    for (const r of await Promise.all([call(ARGS), call(ARGS)])) console.log(`  → ${firstLine(r)}`);
    console.log('retried with valor 1800.00:');
    console.log(`  → ${firstLine(await call({ ...ARGS, valor: '1800.00' }))}`);
    console.log('an invoice this account does not have:');
    console.log(`  → ${firstLine(await call({ ...ARGS, invoice_id: 'FAT-2026-999999' }))}`);
    const charges = new FakePsp(pspFile).charges().filter((c) => c.invoice_id === INVOICE);
    console.log(`fake PSP: ${charges.length} charge${charges.length === 1 ? '' : 's'} for ${INVOICE}`
      + `${charges.map((c) => ` (txid ${c.txid}, valor ${c.valor})`).join('')}`);
  } finally {
    if (mcp) await mcp.close();
    if (agent) {
      agent.proc.kill('SIGTERM');
      await new Promise((resolve) => agent.proc.once('exit', resolve));
    }
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

try {
  await main();
} catch (err) {
  console.error(`demo: ${err.message}`);
  process.exitCode = 1;
}
