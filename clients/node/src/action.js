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
//          └─ in_flight            → wait (retry_after_ms, capped), begin again,
//                                    until the deadline → StillInFlight
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
  IntentdError, InvalidState, LeaseLost, Retriable, StillInFlight, Terminal,
} from './errors.js';

const MIN_LEASE_MS = 1000;

/**
 * What the helper knows; passed to your call and returned at the end.
 *   decision      "execute" | "recover" | "replay" (in_flight is waited out)
 *   recovering    true on recover: a previous attempt may have acted; repeat
 *                 the call with the same key, or ask the provider about txid
 *   replayed      the action had already ended; nothing was called
 *   key, txid     Idempotency-Key and Pix txid, derived from the frozen intent
 *   payload       the frozen normalized payload (not your model's output)
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

  apply(resp) {
    this.begin = resp;
    this.decision = resp.decision;
    this.key = resp.key;
    this.txid = resp.txid;
    this.payload = resp.payload;
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

function errorValue(err) {
  if (err && err.error !== undefined && err.error !== null) return err.error;
  return { type: (err && err.name) || typeof err, message: String((err && err.message) ?? err) };
}

/**
 * @param {import('./client.js').Client} client
 * @param {{tenantId: string, intentRef: string, actionType: string, payload?: object}} intent
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
  const { tenantId, intentRef, actionType, payload } = intent;

  const deadline = Date.now() + waitMs;
  for (;;) {
    const resp = await client.begin(tenantId, intentRef, actionType, payload,
      { leaseMs, onDivergence: options.onDivergence });
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
