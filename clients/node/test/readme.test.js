// The README's snippets, run: each one that calls a PSP is executed against a
// real agent and a fake PSP, and the amount it charged is checked.
//
// Every ```js block of README.md must parse (node --check). A block that calls
// the PSP (`psp.`) must be marked with `<!-- snippet-test: NAME -->` on the
// line before it, NAME one of DRIVERS below, which runs it: so a snippet that
// hands the provider the normalized payload (valor '18000', cents) charges
// R$ 18.000,00 here and fails.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';

import { AgentProcess, cpf } from './agent-process.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const README = path.join(here, '..', 'README.md');
// The repository's README shows a shorter integration, marked "quick".
const ROOT_README = path.join(here, '..', '..', '..', 'README.md');
const INDEX = pathToFileURL(path.join(here, '..', 'index.js')).href;
const PIX_KEY = cpf('111222333');
const MARK = /^<!-- snippet-test: ([a-z_]+) -->$/;

/** [{ mark, code, line }] of every ```js block. */
function snippets(file) {
  const lines = fs.readFileSync(file, 'utf8').split('\n');
  const out = [];
  for (let i = 0; i < lines.length; i += 1) {
    if (lines[i].trim() !== '```js') continue;
    const m = i > 0 ? MARK.exec(lines[i - 1].trim()) : null;
    let j = i + 1;
    while (lines[j].trim() !== '```') j += 1;
    out.push({ mark: m ? m[1] : '', code: lines.slice(i + 1, j).join('\n'), line: i + 1 });
    i = j;
  }
  return out;
}

/** The snippet as a module file importing this package from the folder. */
function moduleFile(dir, name, code) {
  const file = path.join(dir, `${name}.mjs`);
  fs.writeFileSync(file, code.replaceAll("'intentd-client'", `'${INDEX}'`));
  return file;
}

/** Records every charge; a txid charged before is answered, not charged again
 *  (as the BCB API Pix does for PUT /cob/{txid}). */
class FakePSP {
  constructor() {
    this.charges = [];
    this.byTxid = new Map();
  }

  async createCharge(args) {
    if (this.byTxid.has(args.txid)) return this.byTxid.get(args.txid);
    this.charges.push(args);
    const charge = { id: `cob-${this.charges.length}`, status: 'ATIVA', txid: args.txid };
    this.byTxid.set(args.txid, charge);
    return charge;
  }
}

const DRIVERS = new Set(['flow']);
const ROOT_DRIVERS = new Set(['quick']);

describe('README snippets', () => {
  let agent;
  let dir;
  let oldSocket;
  const blocks = snippets(README);
  before(async () => {
    agent = await new AgentProcess().start();
    oldSocket = process.env.INTENTD_SOCKET;
    process.env.INTENTD_SOCKET = agent.socket; // what new Client() reads
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'intentd-readme-'));
  });
  after(async () => {
    if (oldSocket === undefined) delete process.env.INTENTD_SOCKET;
    else process.env.INTENTD_SOCKET = oldSocket;
    fs.rmSync(dir, { recursive: true, force: true });
    await agent.cleanup();
  });

  test('every snippet parses and every PSP call is run here', () => {
    assert.ok(blocks.length >= 4, `${blocks.length} js blocks`);
    blocks.forEach((b, i) => {
      const file = moduleFile(dir, `check-${i}`, b.code);
      const r = spawnSync(process.execPath, ['--check', file], { encoding: 'utf8' });
      assert.equal(r.status, 0, `README.md:${b.line} does not parse:\n${r.stderr}`);
      if (b.code.includes('psp.')) {
        assert.ok(DRIVERS.has(b.mark), `README.md:${b.line} calls the PSP but is not marked `
          + '<!-- snippet-test: NAME --> with a driver in test/readme.test.js');
      }
    });
  });

  test('flow', async () => {
    const [block] = blocks.filter((b) => b.mark === 'flow');
    assert.ok(block, 'README.md has no snippet marked flow');
    const psp = new FakePSP();
    let modelCalls = 0;
    const sent = [];
    const invoice = { id: 'FAT-README-FLOW-JS', customer: '01J9ZQ3K8V7M2N4P6R8T0W2Y4A' };
    Object.assign(globalThis, {
      psp,
      db: { openInvoice: async () => invoice },
      // A model spells the amount as it likes (180 is R$ 180,00); a second
      // run would say something else.
      model: {
        extractCharge: async (text, inv) => {
          modelCalls += 1;
          return {
            cliente_id: inv.customer, valor: 180 + (modelCalls - 1) * 7,
            chave_pix_destino: PIX_KEY, descricao: `${text} (run ${modelCalls})`,
          };
        },
      },
      whatsapp: { sendPixCode: async (to, r) => { sent.push([to, r]); } },
    });
    try {
      const mod = await import(pathToFileURL(moduleFile(dir, 'flow', block.code)).href);
      const body = (wamid) => JSON.stringify({ entry: [{ changes: [{ field: 'messages', value: {
        messages: [{ from: '5511987654321', id: wamid, type: 'text',
          text: { body: 'quero pagar a fatura' } }],
      } }] }] });
      await mod.worker(body('wamid.README-JS-1'));
      await mod.worker(body('wamid.README-JS-1')); // Meta's redelivery: dropped
      // A new message from the customer: the same open invoice, the frozen
      // charge read back: no model call, no second charge.
      await mod.worker(body('wamid.README-JS-2'));
    } finally {
      for (const name of ['psp', 'db', 'model', 'whatsapp']) delete globalThis[name];
    }
    assert.equal(psp.charges.length, 1, JSON.stringify(psp.charges));
    const [charged] = psp.charges;
    assert.equal(charged.amount, '180.00');
    assert.equal(charged.pixKey, PIX_KEY);
    assert.equal(charged.description, 'quero pagar a fatura (run 1)');
    assert.equal(modelCalls, 1);
    assert.deepEqual(sent.map(([, r]) => r.id), ['cob-1', 'cob-1']);
  });
  test("the repository's README: every snippet parses and every PSP call is run here", () => {
    const rootBlocks = snippets(ROOT_README);
    assert.ok(rootBlocks.length >= 1, `${rootBlocks.length} js blocks`);
    rootBlocks.forEach((b, i) => {
      const file = moduleFile(dir, `root-check-${i}`, b.code);
      const r = spawnSync(process.execPath, ['--check', file], { encoding: 'utf8' });
      assert.equal(r.status, 0, `README.md:${b.line} does not parse:\n${r.stderr}`);
      if (b.code.includes('psp.')) {
        assert.ok(ROOT_DRIVERS.has(b.mark), `the repository's README.md:${b.line} calls the PSP `
          + 'but is not marked <!-- snippet-test: NAME --> with a driver in test/readme.test.js');
      }
    });
  });

  test("the repository's README: quick", async () => {
    const found = snippets(ROOT_README).filter((b) => b.mark === 'quick');
    assert.equal(found.length, 1, "the repository's README.md: one js snippet marked quick");
    const psp = new FakePSP();
    let modelCalls = 0;
    const invoice = { id: 'FAT-README-QUICK-JS', customer: '01J9ZQ3K8V7M2N4P6R8T0W2Y4A' };
    Object.assign(globalThis, {
      psp,
      db: { openInvoice: async () => invoice },
      model: {
        extractCharge: async (text, inv) => {
          modelCalls += 1;
          return { cliente_id: inv.customer, valor: 180 + (modelCalls - 1) * 7,
            chave_pix_destino: PIX_KEY };
        },
      },
    });
    let first;
    let again;
    try {
      const mod = await import(pathToFileURL(moduleFile(dir, 'quick', found[0].code)).href);
      const message = { from: '5511987654321', text: 'quero pagar a fatura' };
      first = await mod.chargeInvoice('acme', message);
      again = await mod.chargeInvoice('acme', message); // a redelivery
    } finally {
      for (const name of ['psp', 'db', 'model']) delete globalThis[name];
    }
    assert.equal(psp.charges.length, 1, JSON.stringify(psp.charges));
    assert.equal(psp.charges[0].amount, '180.00');
    assert.equal(psp.charges[0].pixKey, PIX_KEY);
    assert.equal(modelCalls, 1);
    assert.equal(first.id, 'cob-1');
    assert.equal(again.id, 'cob-1');
  });
});
