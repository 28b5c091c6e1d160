// The action flow helper:
//
//   begin ─┬─ execute / recover → await call(act) (lease renewed meanwhile)
//          │     resolves          → complete(result)
//          │     throws Retriable  → fail(retriable: true): released, rethrown
//          │     throws Terminal   → fail(retriable: false): stored, act.failed
//          │     throws otherwise  → outcome unknown: nothing recorded, the lease
//          │                         is cut to 1 s so a redelivery recovers soon;
//          │                         rethrown
//          ├─ replay               → act.replayed, act.response / act.error; call
//          │                         is not invoked
//          ├─ in_flight            → wait (retry_after_ms, capped), begin again,
//          │                         until the deadline → StillInFlight
//          └─ pending_approval     → PendingApproval (the policy holds it for a
//                                    person; your call does not run)
//
// begin/complete is what protects the money (one provider call per intent).
// For an inbound webhook, seen (firstSightings in webhook.js) in front of the
// model call saves the model call a redelivery would cost; it does not
// replace the action.
//
// When to rely on reconcile: a bot that dies during a provider call that may
// have acted (or throws anything but Retriable/Terminal) leaves an uncertain
// action (started, lease run out, nothing recorded). With `intentd reconcile`
// configured for its action type (--once from a timer, or serve
// --reconcile-every), the agent resolves it from the provider's own record:
// charged -> completed, the next delivery replays it; not charged ->
// released, the next delivery executes with the same key and txid; the
// provider cannot say -> nothing recorded, asked again later (a delivery
// meanwhile sees in_flight while the reconciler holds the lease). Without it,
// the next delivery gets recover (act.recovering) and `call` must itself
// check with the provider (by act.txid / act.key), or repeat the call with
// the same key where the provider deduplicates, before charging again. Handle
// act.recovering either way: a delivery may get there first.

import { setTimeout as sleep } from 'node:timers/promises';

import {
  IntentdError, InvalidState, LeaseLost, MissingField, PendingApproval, Retriable, StillInFlight,
  Terminal,
} from './errors.js';

const MIN_LEASE_MS = 1000;

/**
 * What the helper knows; passed to your call and returned at the end.
 *   decision      "execute" | "recover" | "replay" (in_flight is waited out)
 *   recovering    true on recover: a previous attempt may have acted; repeat
 *                 the call with the same key, or ask the provider about txid
 *   replayed      the action had already ended; nothing was called
 *   key, txid     Idempotency-Key and Pix txid, derived from the frozen intent
 *   input         the frozen extraction, every member, as the first attempt
 *                 sent it: build the provider call from it (amounts from
 *                 amountText/amountCents), never from this attempt's model
 *                 output; null for an intent frozen before inputs were kept
 *   money         { field: "180.00" }: the frozen amounts in whole units
 *   pixKeyTypes   { field: "cpf" }: the type each Pix key field was read as
 *                 (cpf, cnpj, phone, email, evp; null under rules version 1)
 *   extracted     true when this attempt called your payload function (the
 *                 intent did not exist yet); false when it read one back
 *   payload       the frozen NORMALIZED key fields (valor "18000" is cents):
 *                 a key input, never what to send a provider
 *   diverged, divergedFields   this attempt's payload differed from the frozen one
 *   response      the stored response (replayed) or your call's result
 *   failed, error the action ended in a terminal failure (now or before)
 *   status        "completed" | "failed" | "released" | "started" (unknown)
 *   leaseLost     a renewal found that a newer attempt took over
 *   waitedPolls   in_flight answers waited out
 */
export class ActionState {
  constructor({ tenantId, intentRef, actionType }) {
    this.tenantId = tenantId;
    this.intentRef = intentRef;
    this.actionType = actionType;
    this.begin = null;
    this.decision = null;
    this.key = null;
    this.txid = null;
    this.payload = null;
    this.input = null;
    this.money = {};
    this.pixKeyTypes = {};
    this.extracted = false;
    this.diverged = false;
    this.divergedFields = [];
    this.created = false;
    this.attempt = null;
    this.leaseToken = null;
    this.leaseUntilMs = null;
    this.previousLeaseToken = null;
    this.status = null;
    this.response = null;
    this.error = null;
    this.leaseLost = false;
    this.waitedPolls = 0;
  }

  get shouldCall() { return this.decision === 'execute' || this.decision === 'recover'; }

  get recovering() { return this.decision === 'recover'; }

  get replayed() { return this.decision === 'replay'; }

  get failed() { return this.status === 'failed'; }

  /**
   * The frozen amount of money field `field` in whole units, exact, as text:
   * "180.00" whether the model wrote 180, "180.0" or 180.00. Send the
   * provider this, not act.payload[field], which is cents.
   * @param {string} field
   * @returns {string}
   */
  amountText(field) {
    if (!Object.hasOwn(this.money, field)) {
      const known = Object.keys(this.money).sort().join(', ') || 'none';
      throw new RangeError(`${JSON.stringify(field)} is not a money field of ${this.actionType} `
        + `(its money fields: ${known})`);
    }
    return this.money[field];
  }

  /**
   * The frozen amount of `field` as an integer count of cents (18000 for
   * R$ 180,00), for providers that take cents. RangeError past
   * Number.MAX_SAFE_INTEGER cents (a number that large cannot be exact).
   * @param {string} field
   * @returns {number}
   */
  amountCents(field) {
    const text = this.amountText(field);
    const negative = text.startsWith('-');
    const cents = BigInt(text.replace('-', '').replace('.', '')) * (negative ? -1n : 1n);
    if (cents > BigInt(Number.MAX_SAFE_INTEGER) || cents < -BigInt(Number.MAX_SAFE_INTEGER)) {
      throw new RangeError(`${field}: ${text} is more cents than a JavaScript number holds `
        + 'exactly; use amountText');
    }
    return Number(cents);
  }

  apply(resp) {
    this.begin = resp;
    this.decision = resp.decision;
    this.key = resp.key;
    this.txid = resp.txid;
    this.payload = resp.payload;
    this.input = resp.input ?? null;
    this.money = isPlainObject(resp.money) ? { ...resp.money } : {};
    this.pixKeyTypes = isPlainObject(resp.pix_key_types) ? { ...resp.pix_key_types } : {};
    this.diverged = Boolean(resp.diverged);
    this.divergedFields = resp.diverged_fields || [];
    this.created = this.created || Boolean(resp.created);
    this.attempt = resp.attempt ?? null;
    this.leaseToken = resp.lease_token ?? null;
    this.leaseUntilMs = resp.lease_until_ms ?? null;
    this.previousLeaseToken = resp.previous_lease_token ?? null;
    if (this.decision === 'replay') {
      this.status = resp.status;
      this.response = resp.response ?? null;
      this.error = resp.error ?? null;
    } else if (this.shouldCall) {
      this.status = 'started';
    }
  }
}

function isPlainObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function errorValue(err) {
  if (err && err.error !== undefined && err.error !== null) return err.error;
  return { type: (err && err.name) || typeof err, message: String((err && err.message) ?? err) };
}

/**
 * @param {import('./client.js').Client} client
 * @param {{tenantId: string, intentRef: string, actionType: string,
 *   payload?: object | (() => object | Promise<object>)}} intent  payload may be
 *   a function (the model call): called only when the intent does not exist
 *   yet, so a redelivery of a frozen intent never pays for the model again
 * @param {(act: ActionState) => Promise<any>} call  invoked only on execute/recover
 * @param {object} [options]
 * @param {number} [options.leaseMs=30000] lease at begin and at each renewal (every leaseMs/3)
 * @param {number} [options.waitMs] keep retrying in_flight this long (default leaseMs + 5000)
 * @param {number} [options.pollMaxMs=1000] longest single sleep between in_flight retries
 * @param {boolean} [options.renew=true]
 * @param {string} [options.onDivergence] "use_frozen" (default) or "reject"
 * @param {Function[]} [options.retriable] extra error classes meaning "did not happen"
 * @param {Function[]} [options.terminal] extra error classes meaning "refused for good"
 * @returns {Promise<ActionState>}
 */
export async function runAction(client, intent, call, options = {}) {
  const leaseMs = options.leaseMs ?? 30000;
  if (!Number.isInteger(leaseMs) || leaseMs < MIN_LEASE_MS || leaseMs > 3600000) {
    throw new RangeError('leaseMs must be an integer between 1000 and 3600000');
  }
  if (typeof call !== 'function') throw new TypeError('action: call must be a function');
  const waitMs = options.waitMs ?? leaseMs + 5000;
  const pollMaxMs = options.pollMaxMs ?? 1000;
  const retriable = [Retriable, ...(options.retriable || [])];
  const terminal = [Terminal, ...(options.terminal || [])];
  const act = new ActionState(intent);
  const { tenantId, intentRef, actionType } = intent;
  const extract = typeof intent.payload === 'function' ? intent.payload : null;
  let payload = extract ? undefined : intent.payload;
  const begin = async () => {
    const args = { leaseMs, onDivergence: options.onDivergence };
    try {
      return await client.begin(tenantId, intentRef, actionType, payload, args);
    } catch (err) {
      // No intent yet, and a begin without a payload: extract, once.
      if (!extract || act.extracted || !(err instanceof MissingField)
          || err.field !== 'payload') throw err;
    }
    const extracted = await extract();
    if (!isPlainObject(extracted)) {
      throw new TypeError(`the payload function of ${intentRef} returned `
        + `${extracted === null ? 'null' : typeof extracted}, not an object`);
    }
    payload = extracted;
    act.extracted = true;
    return client.begin(tenantId, intentRef, actionType, payload, args);
  };

  const deadline = Date.now() + waitMs;
  for (;;) {
    const resp = await begin();
    if (resp.decision === 'pending_approval') {
      const approval = resp.approval && typeof resp.approval === 'object' ? resp.approval : {};
      const reason = String(approval.reason || '');
      throw new PendingApproval(`${intentRef}: waits for a person's approval (${reason}); `
        + 'nothing was done', { key: resp.key, reason, approval });
    }
    if (resp.decision !== 'in_flight') {
      act.apply(resp);
      break;
    }
    const remaining = deadline - Date.now();
    const retryAfterMs = Number(resp.retry_after_ms) || 0;
    if (remaining <= 0) {
      throw new StillInFlight(`${intentRef}: another attempt still holds the lease after `
        + `${waitMs} ms (retry in ${retryAfterMs} ms)`, { key: resp.key, retryAfterMs });
    }
    act.waitedPolls += 1;
    const hint = Math.max(retryAfterMs, 10);
    const step = Math.min(hint, pollMaxMs, remaining);
    await sleep(step < hint ? step * (0.8 + 0.2 * Math.random()) : step);
  }
  if (!act.shouldCall) return act;

  const stopRenewing = options.renew === false ? () => Promise.resolve()
    : startRenewing(client, act, leaseMs);
  let result;
  let thrown;
  let threw = false;
  try {
    result = await call(act);
  } catch (err) {
    threw = true;
    thrown = err;
  } finally {
    await stopRenewing();
  }

  if (!threw) {
    await client.complete(tenantId, act.key, act.leaseToken, result);
    act.status = 'completed';
    act.response = result === undefined ? null : result;
    return act;
  }
  if (retriable.some((cls) => thrown instanceof cls)) {
    const value = errorValue(thrown);
    const r = await client.fail(tenantId, act.key, act.leaseToken, value, { retriable: true });
    act.status = r.status || 'released';
    act.error = value;
    throw thrown;
  }
  if (terminal.some((cls) => thrown instanceof cls)) {
    const value = errorValue(thrown);
    const r = await client.fail(tenantId, act.key, act.leaseToken, value, { retriable: false });
    act.status = r.status || 'failed';
    act.error = value;
    return act;
  }
  try {
    await client.renew(tenantId, act.key, act.leaseToken, { leaseMs: MIN_LEASE_MS });
  } catch (e) {
    if (!(e instanceof IntentdError)) throw e;
  }
  throw thrown;
}

// Renews every leaseMs/3 until stopped; returns the stop function, which
// resolves once no renewal is running.
function startRenewing(client, act, leaseMs) {
  let stopped = false;
  let timer = null;
  let running = Promise.resolve();
  const tick = () => {
    if (stopped) return;
    running = client.renew(act.tenantId, act.key, act.leaseToken, { leaseMs })
      .then((r) => {
        act.leaseUntilMs = r.lease_until_ms ?? act.leaseUntilMs;
        schedule();
      }, (err) => {
        if (err instanceof LeaseLost || err instanceof InvalidState) {
          act.leaseLost = true;
          return;
        }
        schedule(); // agent unreachable for now: try again next interval
      });
  };
  const schedule = () => {
    if (!stopped) timer = setTimeout(tick, leaseMs / 3);
  };
  schedule();
  return async () => {
    stopped = true;
    clearTimeout(timer);
    await running;
  };
}
