// Shared by the tests: a real agent, a fake PSP in a temporary file, the
// invoices of a run, and an MCP client that sends every call twice.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';

import { FakePsp } from '../examples/mcp-pix-server/fake-psp.js';
import { Invoices } from '../examples/mcp-pix-server/invoices.js';

export { AgentProcess, cpf } from '../../node/test/agent-process.js';

export const HERE = path.dirname(fileURLToPath(import.meta.url));
export const SERVER = path.join(HERE, '..', 'examples', 'mcp-pix-server', 'server.js');
export const TENANT = 'acme';

const RUN = Math.random().toString(16).slice(2, 8);
let counter = 0;

/** A fresh invoice number, unique across runs of one agent. */
export function invoiceId() {
  counter += 1;
  return `FAT-${RUN}-${String(counter).padStart(6, '0')}`;
}

/** A temporary folder with the fake PSP's file and an invoices file of
 *  `count` fresh invoices of TENANT. */
export class Fixture {
  constructor(count = 20) {
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'intentd-agent-tools-'));
    this.pspFile = path.join(this.dir, 'psp.jsonl');
    this.psp = new FakePsp(this.pspFile, { delayBeforeMs: 0, delayAfterMs: 0 });
    this.ids = Array.from({ length: count }, () => invoiceId());
    const table = Object.fromEntries(this.ids.map((id, i) => [id,
      { cliente_id: `01J9ZQ3K8V7M2N4P6R8T0W2Y${String(i).padStart(2, '0')}`, valor: '180.00' }]));
    this.invoicesFile = path.join(this.dir, 'invoices.json');
    fs.writeFileSync(this.invoicesFile, JSON.stringify({ [TENANT]: table }));
    this.invoices = new Invoices({ [TENANT]: table });
    this.next = 0;
  }

  /** An invoice of TENANT nobody has charged yet. */
  invoice() {
    if (this.next >= this.ids.length) throw new Error('fixture: out of invoices');
    return this.ids[this.next++];
  }

  /** The charges the fake PSP made for one invoice. */
  chargesOf(invoice) {
    return this.psp.charges().filter((c) => c.invoice_id === invoice);
  }

  cleanup() { fs.rmSync(this.dir, { recursive: true, force: true }); }
}

/** The model's arguments for a charge of `invoice`. */
export function chargeArgs(invoice, overrides = {}) {
  return { invoice_id: invoice, valor: '180.00', chave_pix_destino: '111.222.333-96', ...overrides };
}

/** Waits until `predicate()` is true, polling every 10 ms, or throws. */
export async function until(predicate, timeoutMs = 10000, what = 'condition') {
  const deadline = Date.now() + timeoutMs;
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

/** The text of an MCP CallToolResult. */
export function textOf(result) {
  return result.content.map((c) => c.text).join('\n');
}

/**
 * An MCP client that sends every tool call twice, concurrently, as the
 * duplicating clients of the issue do; resolves to both results.
 */
export function callTwice(mcpClient, name, args) {
  return Promise.all([mcpClient.callTool({ name, arguments: args }),
    mcpClient.callTool({ name, arguments: args })]);
}
