// A fake Pix PSP (payment service provider) that keeps its charges in a file,
// so that several server processes, and a server killed mid-call, share one
// provider, and a test can count what it holds.
//
// It is naive on purpose: every createCharge is a new charge, even under a
// txid it has seen (a real API Pix refuses a second PUT /cob/{txid}, but
// other providers and other key choices do not). So a charge made twice
// shows as two, and the tests of the guard can fail.
//
// The file is JSON lines, appended with O_APPEND (whole lines, safe across
// processes): {"type":"request",…} when a call arrives, {"type":"charge",…}
// when the charge is made. Delays from the constructor or the environment
// (FAKE_PSP_DELAY_BEFORE_MS, FAKE_PSP_DELAY_AFTER_MS) leave room to kill the
// caller before the charge, or after it and before the answer.

import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';

export class FakePsp {
  /**
   * @param {string} file the JSON-lines file (created on the first charge)
   * @param {{delayBeforeMs?: number, delayAfterMs?: number}} [options]
   */
  constructor(file, options = {}) {
    this.file = file;
    this.delayBeforeMs = options.delayBeforeMs ?? Number(process.env.FAKE_PSP_DELAY_BEFORE_MS || 0);
    this.delayAfterMs = options.delayAfterMs ?? Number(process.env.FAKE_PSP_DELAY_AFTER_MS || 0);
  }

  append(record) {
    fs.appendFileSync(this.file, `${JSON.stringify(record)}\n`);
  }

  records() {
    let text;
    try {
      text = fs.readFileSync(this.file, 'utf8');
    } catch (err) {
      if (err.code === 'ENOENT') return [];
      throw err;
    }
    return text.split('\n').filter((l) => l !== '').map((l) => JSON.parse(l));
  }

  /** Every charge made, in order (a txid charged twice appears twice). */
  charges() { return this.records().filter((r) => r.type === 'charge'); }

  /** The calls that reached the provider, charged or not yet. */
  requests() { return this.records().filter((r) => r.type === 'request'); }

  /**
   * Creates a charge (API Pix: PUT /cob/{txid}). Resolves to
   * { charge_id, txid, status: 'ATIVA', valor, chave, invoice_id }.
   */
  async createCharge({ txid, valor, chave, invoiceId, descricao }) {
    this.append({ type: 'request', txid, at_ms: Date.now(), pid: process.pid });
    if (this.delayBeforeMs > 0) await sleep(this.delayBeforeMs);
    const charge = { type: 'charge', charge_id: `ch_${randomUUID().slice(0, 12)}`, txid,
      status: 'ATIVA', valor, chave, invoice_id: invoiceId, descricao: descricao ?? null,
      at_ms: Date.now() };
    this.append(charge);
    if (this.delayAfterMs > 0) await sleep(this.delayAfterMs);
    return answer(charge);
  }

  /** The first charge under txid (API Pix: GET /cob/{txid}), or null. */
  async findCharge(txid) {
    const charge = this.charges().find((c) => c.txid === txid);
    return charge ? answer(charge) : null;
  }
}

function answer(charge) {
  const { type, at_ms: at, ...rest } = charge;
  return rest;
}
