// The client: one Unix socket connection, requests one at a time (ids per
// request, no pipelining). Safe to share between concurrent async callers:
// requests queue behind each other.

import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

import { runAction } from './action.js';
import {
  FrameTooLarge, IntentdError, ProtocolError, Timeout, Unavailable, errorFromResponse,
} from './errors.js';

export const DEFAULT_SOCKET = '/run/intentd/intentd.sock';
const DEFAULT_MAX_FRAME_BYTES = 65536;
const MAX_RESPONSE_BYTES = 16 * 1024 * 1024;

// Requests that may be sent again when the connection broke after sending:
// repeating them changes nothing, or turns an unseen execute into in_flight
// (never a second execute). amend is not resent: its outcome is unknown.
// Neither is seen: if the first one was recorded, the resend answers
// first=false and the event would be dropped although nobody handled it (a
// claim's resend answers "processing" until the lost claim's lease expires).
// done repeats with the same token; forget of a dropped record answers
// forgotten=false and drops nothing more.
const RESENDABLE_OPS = new Set(['ping', 'derive', 'freeze', 'begin', 'complete', 'fail',
  'renew', 'status', 'lookup', 'uncertain', 'stats', 'done', 'release', 'forget']);
const RETRY_CODES = new Set(['overloaded', 'shutting_down']);

/** Why an op that is not resent has an unknown outcome, and what to do. */
function lostHint(op, args) {
  if (op === 'seen' && args.lease_ms != null) {
    return 'the agent may have recorded the claim: a later seen with leaseMs answers '
      + 'first=false (processing, retry_after_ms) until that lease expires, then first=true '
      + 'with the next lease_token';
  }
  if (op === 'seen') {
    return 'the agent may have recorded the message as seen: a later seen answers '
      + 'first=false, so handle this one now or accept losing it';
  }
  return 'check with lookup';
}

/** The messages of a batch seen: ids, or { messageId | message_id, meta }. */
function seenEntries(messages) {
  if (!Array.isArray(messages)) {
    throw new TypeError('seenBatch: messages must be an array of message ids or of '
      + '{ messageId, meta } objects');
  }
  return messages.map((m) => {
    if (typeof m === 'string') return { message_id: m };
    if (m !== null && typeof m === 'object' && !Array.isArray(m)) {
      const { messageId, message_id: snake, meta, ...rest } = m;
      return { ...rest, message_id: messageId ?? snake, meta };
    }
    throw new TypeError(`seenBatch: a message must be an id (string) or an object with `
      + `messageId, not ${m === null ? 'null' : typeof m}`);
  });
}

/** Capped exponential backoff with equal jitter (half fixed, half random). */
export function backoffDelayMs(attempt, initialMs, maxMs) {
  const ceiling = Math.min(maxMs, initialMs * 2 ** Math.min(attempt, 30));
  return ceiling / 2 + Math.random() * (ceiling / 2);
}

class Connection {
  constructor(socket) {
    this.socket = socket;
    this.buffer = '';
    this.lines = [];
    this.waiter = null;
    this.closedError = null;
    socket.setEncoding('utf8'); // keeps multi-byte characters whole across chunks
    socket.on('data', (chunk) => {
      this.buffer += chunk;
      let nl;
      while ((nl = this.buffer.indexOf('\n')) >= 0) {
        this.lines.push(this.buffer.slice(0, nl));
        this.buffer = this.buffer.slice(nl + 1);
      }
      if (this.buffer.length > MAX_RESPONSE_BYTES) {
        this.fail(new ProtocolError('the agent\'s answer exceeds 16 MiB without a newline'));
      }
      this.wake();
    });
    socket.on('error', (err) => this.fail(err));
    socket.on('close', () => this.fail(Object.assign(new Error('the agent closed the connection'),
      { code: 'ECONNRESET' })));
  }

  fail(err) {
    if (!this.closedError) this.closedError = err;
    this.socket.destroy();
    this.wake();
  }

  wake() {
    const w = this.waiter;
    if (!w) return;
    if (this.lines.length > 0) {
      this.waiter = null;
      w.resolve(this.lines.shift());
    } else if (this.closedError) {
      this.waiter = null;
      w.reject(this.closedError);
    }
  }

  nextLine() {
    return new Promise((resolve, reject) => {
      this.waiter = { resolve, reject };
      this.wake();
    });
  }

  write(line) {
    return new Promise((resolve, reject) => {
      if (this.closedError) { reject(this.closedError); return; }
      this.socket.write(line, 'utf8', (err) => (err ? reject(err) : resolve()));
    });
  }

  close() { this.socket.destroy(); }
}

function connect(path, timeoutMs) {
  return new Promise((resolve, reject) => {
    const socket = net.createConnection({ path });
    const timer = setTimeout(() => {
      socket.destroy();
      reject(Object.assign(new Error(`connect timed out after ${timeoutMs} ms`),
        { code: 'ETIMEDOUT' }));
    }, timeoutMs);
    socket.once('connect', () => {
      clearTimeout(timer);
      socket.removeAllListeners('error');
      resolve(new Connection(socket));
    });
    socket.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}

function withTimeout(promise, ms, onTimeout) {
  let timer;
  return Promise.race([
    promise,
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(onTimeout()), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/** Arguments whose value is undefined or null are left out of a request. */
function encode(op, id, args, maxFrameBytes) {
  const msg = { id, op };
  for (const [k, v] of Object.entries(args)) {
    if (v !== undefined && v !== null) msg[k] = v;
  }
  const text = JSON.stringify(msg);
  const bytes = Buffer.byteLength(text, 'utf8');
  if (maxFrameBytes != null && bytes > maxFrameBytes) {
    throw new FrameTooLarge(`${op} request is ${bytes} bytes; the frame limit is `
      + `${maxFrameBytes} (send a smaller payload or response)`);
  }
  return `${text}\n`;
}

function decode(line, id) {
  let resp;
  try {
    resp = JSON.parse(line);
  } catch (e) {
    throw new ProtocolError(`the agent sent a line that is not JSON: ${e.message}`);
  }
  if (resp === null || typeof resp !== 'object' || Array.isArray(resp)
      || typeof resp.ok !== 'boolean') {
    throw new ProtocolError(`the agent sent an answer without ok: ${line.slice(0, 200)}`);
  }
  if (resp.id !== id && !(resp.ok === false && !('id' in resp))) {
    throw new ProtocolError(`answer id ${JSON.stringify(resp.id)} does not match request id ${id}`);
  }
  if (!resp.ok) throw errorFromResponse(resp);
  delete resp.id;
  delete resp.ok;
  return resp;
}

export class Client {
  /**
   * @param {object} [options]
   * @param {string} [options.socketPath] default $INTENTD_SOCKET, else /run/intentd/intentd.sock
   * @param {number} [options.timeoutMs=10000] wait for one answer (and to connect)
   * @param {number} [options.reconnectTimeoutMs=10000] keep reconnecting (backoff with jitter)
   *   when the agent is unreachable or answers overloaded/shutting_down; 0 disables
   * @param {number} [options.backoffInitialMs=50]
   * @param {number} [options.backoffMaxMs=2000]
   * @param {number|null} [options.maxFrameBytes=65536] refuse longer requests locally
   */
  constructor(options = {}) {
    this.socketPath = options.socketPath || process.env.INTENTD_SOCKET || DEFAULT_SOCKET;
    this.timeoutMs = options.timeoutMs ?? 10000;
    this.reconnectTimeoutMs = options.reconnectTimeoutMs ?? 10000;
    this.backoffInitialMs = options.backoffInitialMs ?? 50;
    this.backoffMaxMs = options.backoffMaxMs ?? 2000;
    this.maxFrameBytes = options.maxFrameBytes === undefined
      ? DEFAULT_MAX_FRAME_BYTES : options.maxFrameBytes;
    this.reconnects = 0;
    this.conn = null;
    this.opened = false;
    this.nextId = 1;
    this.queue = Promise.resolve();
  }

  close() {
    if (this.conn) this.conn.close();
    this.conn = null;
  }

  drop() { this.close(); }

  async ensureConnected() {
    if (this.conn && !this.conn.closedError) return this.conn;
    this.drop();
    this.conn = await connect(this.socketPath, this.timeoutMs);
    if (this.opened) this.reconnects += 1;
    this.opened = true;
    return this.conn;
  }

  /** Sends one request; resolves to the answer's members (without id and
   *  ok) or rejects with the typed IntentdError. */
  request(op, args = {}) {
    const run = this.queue.then(() => this.exchange(op, args));
    this.queue = run.catch(() => {});
    return run;
  }

  async exchange(op, args) {
    const id = this.nextId++;
    const line = encode(op, id, args, this.maxFrameBytes);
    const giveUpAt = Date.now() + this.reconnectTimeoutMs;
    for (let attempt = 0; ; attempt += 1) {
      let sent = false;
      let failure;
      try {
        const reply = await withTimeout((async () => {
          const conn = await this.ensureConnected();
          await conn.write(line);
          sent = true;
          return conn.nextLine();
        })(), this.timeoutMs, () => new Timeout(
          `${op}: no answer from ${this.socketPath} within ${this.timeoutMs} ms`));
        return decode(reply, id);
      } catch (err) {
        if (err instanceof Timeout || err instanceof ProtocolError) {
          this.drop();
          throw err;
        }
        if (err instanceof IntentdError) {
          if (!RETRY_CODES.has(err.code)) throw err;
          if (err.code === 'shutting_down') this.drop();
        } else {
          this.drop();
          if (sent && !RESENDABLE_OPS.has(op)) {
            throw new Unavailable(`${op}: connection lost after sending; the outcome is `
              + `unknown (${lostHint(op, args)})`, { cause: err });
          }
        }
        failure = err;
      }
      const delay = backoffDelayMs(attempt, this.backoffInitialMs, this.backoffMaxMs);
      if (Date.now() + delay > giveUpAt) {
        if (failure instanceof IntentdError) throw failure;
        throw new Unavailable(`cannot reach the agent at ${this.socketPath}: `
          + `${failure && failure.message}`, { cause: failure });
      }
      await sleep(delay);
    }
  }

  // -- one method per op (docs/protocol.md, "Operations") -------------------

  ping() { return this.request('ping'); }

  derive(tenantId, actionType, payload, { rulesVersion } = {}) {
    return this.request('derive', {
      tenant_id: tenantId, action_type: actionType, payload, rules_version: rulesVersion,
    });
  }

  freeze(tenantId, intentRef, actionType, payload) {
    return this.request('freeze', {
      tenant_id: tenantId, intent_ref: intentRef, action_type: actionType, payload,
    });
  }

  /** payload may be omitted (undefined) when the intent exists. */
  begin(tenantId, intentRef, actionType, payload, { leaseMs, onDivergence } = {}) {
    return this.request('begin', {
      tenant_id: tenantId, intent_ref: intentRef, action_type: actionType, payload,
      lease_ms: leaseMs, on_divergence: onDivergence,
    });
  }

  /** response may be any JSON value, null (and undefined) included. */
  complete(tenantId, key, leaseToken, response) {
    return this.requestWithNull('complete', {
      tenant_id: tenantId, key, lease_token: leaseToken,
    }, 'response', response);
  }

  fail(tenantId, key, leaseToken, error, { retriable }) {
    if (typeof retriable !== 'boolean') throw new TypeError('fail: retriable must be a boolean');
    return this.requestWithNull('fail', {
      tenant_id: tenantId, key, lease_token: leaseToken, retriable,
    }, 'error', error);
  }

  // `response`/`error` are required and may be null: sent even when null.
  requestWithNull(op, args, name, value) {
    return this.request(op, { ...args, [name]: new JsonNullable(value) });
  }

  renew(tenantId, key, leaseToken, { leaseMs } = {}) {
    return this.request('renew', {
      tenant_id: tenantId, key, lease_token: leaseToken, lease_ms: leaseMs,
    });
  }

  status(tenantId, key) { return this.request('status', { tenant_id: tenantId, key }); }

  lookup(tenantId, intentRef, actionType) {
    return this.request('lookup', {
      tenant_id: tenantId, intent_ref: intentRef, action_type: actionType,
    });
  }

  amend(tenantId, intentRef, actionType, payload, { force = false } = {}) {
    return this.request('amend', {
      tenant_id: tenantId, intent_ref: intentRef, action_type: actionType, payload,
      force: force || undefined,
    });
  }

  async uncertain(tenantId, { limit } = {}) {
    return (await this.request('uncertain', { tenant_id: tenantId, limit })).actions;
  }

  /** Intents the policy holds for approval, oldest first. */
  async pending(tenantId, { limit } = {}) {
    return (await this.request('pending', { tenant_id: tenantId, limit })).intents;
  }

  /** Approves a pending intent (admin): its next begin executes. */
  approve(tenantId, intentRef, actionType, { note } = {}) {
    return this.request('approve', {
      tenant_id: tenantId, intent_ref: intentRef, action_type: actionType, note,
    });
  }

  /** Denies a pending intent (admin): its action ends failed ("denied"). */
  deny(tenantId, intentRef, actionType, { note } = {}) {
    return this.request('deny', {
      tenant_id: tenantId, intent_ref: intentRef, action_type: actionType, note,
    });
  }

  stats() { return this.request('stats'); }

  /**
   * Records one sighting of an inbound message (a webhook's message id).
   * Resolves to { first, state, count, first_seen_at_ms, expires_at_ms,
   * meta? }: first true means the first sighting (process it), false a
   * duplicate (drop it); state is "seen", "processing" or "done"; meta is
   * the first sighting's. ttlMs: keep the record that long after this
   * sighting (default: the agent's retention, at least 7 days).
   *
   * leaseMs makes it a claim: a first sighting then carries lease_token and
   * lease_until_ms; call done() with that token once the message is
   * processed. If the processor dies first, the lease runs out and the next
   * claim gets first true again with the next token (lease_token > 1:
   * process it again). A duplicate of a live claim carries retry_after_ms.
   *
   * Needs an agent with the op (else UnknownOp). Not resent after a broken
   * connection: Unavailable, outcome unknown.
   */
  seen(tenantId, channel, messageId, { ttlMs, meta, leaseMs } = {}) {
    return this.request('seen', {
      tenant_id: tenantId, channel, message_id: messageId, ttl_ms: ttlMs, meta,
      lease_ms: leaseMs,
    });
  }

  /**
   * seen for 1..1000 messages (ids, or { messageId, meta }; the meta option
   * is the default of entries without their own); resolves to the results
   * in request order, each { message_id, ...the members of a single seen }.
   * An id repeated in the batch is answered as if sent one after the other.
   */
  async seenBatch(tenantId, channel, messages, { ttlMs, meta, leaseMs } = {}) {
    return (await this.request('seen', {
      tenant_id: tenantId, channel, messages: seenEntries(messages), ttl_ms: ttlMs, meta,
      lease_ms: leaseMs,
    })).results;
  }

  /**
   * Records that a message claimed by seen(..., { leaseMs }) was processed:
   * resolves to { state: 'done' }; later claims read it as a duplicate.
   * Repeating it with the same token changes nothing. Rejects with LeaseLost
   * when the lease expired and a newer claim took the message over (stop:
   * that processor owns it now), InvalidState for a plain sighting, a token
   * never granted or a message done under another token, NotFound when
   * there is no live record (never seen, forgotten or expired).
   */
  done(tenantId, channel, messageId, leaseToken) {
    return this.request('done', {
      tenant_id: tenantId, channel, message_id: messageId, lease_token: leaseToken,
    });
  }

  /**
   * Gives a message claimed by seen(..., { leaseMs }) back unprocessed (the
   * model call failed, the bot is stopping): the next delivery takes it over
   * at once as a first sighting instead of waiting out the lease. Resolves
   * to { state: 'processing', lease_until_ms } (the claim ended now). Fenced
   * like done: LeaseLost when a newer claim took the message over,
   * InvalidState for a message done or a token never granted. Repeating it
   * with the same token succeeds again.
   */
  release(tenantId, channel, messageId, leaseToken) {
    return this.request('release', {
      tenant_id: tenantId, channel, message_id: messageId, lease_token: leaseToken,
    });
  }

  /**
   * Admin: drops the record of a message so that it reads as never seen
   * (the next seen answers first: true). Resolves to { forgotten: true }
   * when a live record was dropped, else { forgotten: false }. Forbidden
   * without admin rights under access rules.
   */
  forget(tenantId, channel, messageId) {
    return this.request('forget', { tenant_id: tenantId, channel, message_id: messageId });
  }

  /**
   * The begin → provider call → complete/fail flow (see action.js):
   *   const act = await client.action('acme', 'FAT-1', 'pix.cobranca', extract,
   *     async (act) => psp.charge({ idempotencyKey: act.key, txid: act.txid,
   *                                 amount: act.amountText('valor') }));
   *   act.replayed, act.response, act.failed, act.error
   * payload (here extract) may be the object or a function returning it
   * (the model call), called only when the intent does not exist yet.
   * This is what protects the money: one provider call per intent, however
   * often the message is redelivered. seen (and firstSightings) in front of
   * it only save the model call a redelivered message would cost.
   */
  async action(tenantId, intentRef, actionType, payload, call, options = {}) {
    return runAction(this, { tenantId, intentRef, actionType, payload }, call, options);
  }
}

/** Serialized as its value, null when undefined (JSON.stringify calls toJSON). */
class JsonNullable {
  constructor(value) { this.value = value === undefined ? null : value; }
  toJSON() { return this.value; }
}
