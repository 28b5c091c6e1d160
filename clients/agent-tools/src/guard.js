// A money-moving tool behind intentd: each call is begin → provider call →
// complete/fail, and every answer is a ToolOutcome (never a throw).
//
//   anchor(args, context) ─ refuses ──────────────────────→ refused (no begin)
//          │ { tenantId, intentRef, payload? }
//   begin ─┬─ execute ──────── call(frozen input) ──────────→ executed
//          ├─ recover ──── status(txid) finds it ───────────→ recovered
//          │                └ not found / no status → call ─→ executed
//          ├─ replay ──────────────────────────────────────→ replayed / failed
//          └─ in_flight ── waits up to inFlightWaitMs, then as above,
//                          or ────────────────────────────→ in_progress
//   call throws Retriable → released; Terminal → failed; else → unknown
//
// The anchor never comes from the model alone. A key drawn from the model's
// output (its arguments, a tool_call_id, a fresh uuid) changes on every
// retry, and the retry charges again. The tool author's anchor function maps
// the arguments and the server-side context (the session's authenticated
// tenant, the server's own database) to the business reference that existed
// before the model ran: (tenant_id, intent_ref). It may refuse (throw
// AnchorRefused): nothing is frozen then.

import {
  IntentdError, PendingApproval, Retriable, StillInFlight, Terminal, runAction,
} from 'intentd-client';

import { AnchorRefused } from './errors.js';
import { frozenInput } from './frozen-input.js';
import { ToolOutcome } from './outcome.js';

const TXID_LENGTH = 35; // a txid is the key's first 35 characters

/** The call diverged from the frozen intent and the agent did not say what
 *  was frozen: nothing is sent to the provider (see frozen-input.js). */
class FrozenInputUnavailable extends Error {}
/** The same, on a fresh grant: nothing acted under it, so it is released. */
class FrozenInputUnavailableRetriable extends Retriable {}

function frozenMessage(act) {
  return `the arguments differ from the intent frozen for ${act.intentRef} in `
    + `${act.divergedFields.join(', ')}, and this intentd agent does not return the frozen `
    + 'arguments (the begin answer has no input member)';
}

/** The message of anything thrown, an Error or not. */
function messageOf(err) {
  return String(err?.message ?? err);
}

function plainObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function nonEmpty(v) {
  return typeof v === 'string' && v.trim() !== '';
}

export class GuardedTool {
  /**
   * @param {object} spec
   * @param {import('intentd-client').Client} spec.client
   * @param {string} spec.actionType e.g. "pix.cobranca"
   * @param {(args: object, context: any) => Promise<{tenantId: string,
   *   intentRef: string, payload?: object}>} spec.anchor  the business
   *   reference of this call, from server-side knowledge; throw AnchorRefused
   *   to refuse. payload defaults to the arguments.
   * @param {(input: object, info: CallInfo) => Promise<any>} spec.call  the
   *   provider call, with the frozen input; its result is stored and replayed.
   *   Throw Retriable when the provider surely did not act, Terminal when it
   *   refused for good; anything else leaves the outcome unknown.
   * @param {(info: CallInfo) => Promise<any>} [spec.status]  on recover, asks
   *   the provider for the charge of info.txid: its record, or null/undefined
   *   when there is none (then `call` runs again under the same txid)
   * @param {number} [spec.leaseMs=30000] the lease, renewed every third of it
   * @param {number} [spec.inFlightWaitMs=10000] how long a call waits for
   *   another one holding the action before answering in_progress
   * @param {number} [spec.pollMaxMs=250] longest sleep between in_flight polls
   * @param {Function[]} [spec.retriable] [spec.terminal] the provider
   *   library's error classes meaning "did not act" / "refused for good"
   *
   * CallInfo: { tenantId, intentRef, actionType, key, txid, recovering,
   *   attempt, args (this call's), context, money ({ valor: '180.00' }),
   *   amountText(field) ("180.00": the frozen amount in whole units, exact;
   *   give the provider this), amountCents(field) (an integer) }
   */
  constructor(spec) {
    if (!spec || !spec.client) throw new TypeError('guardTool: client is required');
    if (!nonEmpty(spec.actionType)) throw new TypeError('guardTool: actionType is required');
    for (const fn of ['anchor', 'call']) {
      if (typeof spec[fn] !== 'function') throw new TypeError(`guardTool: ${fn} must be a function`);
    }
    if (spec.status != null && typeof spec.status !== 'function') {
      throw new TypeError('guardTool: status must be a function');
    }
    this.client = spec.client;
    this.actionType = spec.actionType;
    this.anchor = spec.anchor;
    this.call = spec.call;
    this.status = spec.status ?? null;
    this.leaseMs = spec.leaseMs ?? 30000;
    this.inFlightWaitMs = spec.inFlightWaitMs ?? 10000;
    this.pollMaxMs = spec.pollMaxMs ?? 250;
    this.retriable = [Retriable, ...(spec.retriable || [])];
    this.terminal = [Terminal, ...(spec.terminal || [])];
  }

  /**
   * Runs one tool call. Resolves to a ToolOutcome whatever happens: intentd
   * errors, provider errors and anchor refusals become outcomes with
   * isError, so that a tool server never crashes on them.
   * @param {object} args the model's arguments
   * @param {*} context server-side context, handed to anchor, call and status
   */
  async run(args, context) {
    let anchor;
    try {
      anchor = await this.anchor(args, context);
      if (!plainObject(anchor) || !nonEmpty(anchor.tenantId) || !nonEmpty(anchor.intentRef)
          || (anchor.payload != null && !plainObject(anchor.payload))) {
        throw new TypeError('anchor must return { tenantId, intentRef, payload? } with '
          + 'non-empty strings and payload an object');
      }
    } catch (err) {
      if (err instanceof AnchorRefused) {
        return new ToolOutcome({ outcome: 'refused', actionType: this.actionType,
          error: { code: err.code, message: err.message } });
      }
      return new ToolOutcome({ outcome: 'error', actionType: this.actionType,
        error: { code: 'anchor_error', message: `the tool's anchor function failed: ${messageOf(err)}` } });
    }
    const payload = anchor.payload ?? args;
    const intent = { tenantId: anchor.tenantId, intentRef: anchor.intentRef,
      actionType: this.actionType, payload };
    const step = { act: null, callError: undefined, returned: false, found: false, result: undefined };
    try {
      const act = await runAction(this.client, intent,
        (a) => this.provider(a, payload, args, context, step),
        { leaseMs: this.leaseMs, waitMs: this.inFlightWaitMs, pollMaxMs: this.pollMaxMs,
          retriable: this.retriable.slice(1), terminal: this.terminal.slice(1) });
      return this.settled(act, step);
    } catch (err) {
      return this.thrown(err, step, intent);
    }
  }

  // The provider step, run by runAction on execute and recover only.
  async provider(act, payload, args, context, step) {
    step.act = act;
    const info = { tenantId: act.tenantId, intentRef: act.intentRef, actionType: act.actionType,
      key: act.key, txid: act.txid, recovering: act.recovering, attempt: act.attempt, args, context,
      money: { ...act.money },
      amountText: (field) => act.amountText(field),
      amountCents: (field) => act.amountCents(field) };
    try {
      if (act.recovering && this.status) {
        const found = await this.status(info);
        if (found !== null && found !== undefined) {
          step.found = true;
          step.returned = true;
          step.result = found;
          return found;
        }
      }
      const frozen = frozenInput(act.begin, payload);
      if (frozen === null) {
        throw act.recovering ? new FrozenInputUnavailable(frozenMessage(act))
          : new FrozenInputUnavailableRetriable(frozenMessage(act),
            { error: { reason: 'frozen_input_unavailable', diverged_fields: act.divergedFields } });
      }
      const result = await this.call(frozen.input, info);
      step.returned = true;
      step.result = result;
      return result;
    } catch (err) {
      step.callError = err;
      throw err;
    }
  }

  base(act) {
    return { intentRef: act.intentRef, actionType: act.actionType, txid: act.txid,
      divergedFields: act.divergedFields };
  }

  // runAction returned: replayed, completed now, or failed for good now.
  settled(act, step) {
    const base = this.base(act);
    if (act.replayed) {
      return act.failed
        ? new ToolOutcome({ ...base, outcome: 'failed', replay: true, error: act.error })
        : new ToolOutcome({ ...base, outcome: 'replayed', replay: true, result: act.response });
    }
    if (act.failed) return new ToolOutcome({ ...base, outcome: 'failed', error: act.error });
    if (step.found) {
      return new ToolOutcome({ ...base, outcome: 'recovered', replay: true, result: act.response });
    }
    return new ToolOutcome({ ...base, outcome: 'executed', result: act.response,
      recovering: act.recovering });
  }

  // runAction threw: still in flight, a provider error, or an intentd error.
  thrown(err, step, intent) {
    if (err instanceof PendingApproval) {
      return new ToolOutcome({ outcome: 'pending_approval', intentRef: intent.intentRef,
        actionType: intent.actionType, txid: err.key ? err.key.slice(0, TXID_LENGTH) : null,
        error: { code: 'pending_approval', message: err.reason } });
    }
    if (err instanceof StillInFlight) {
      return new ToolOutcome({ outcome: 'in_progress', intentRef: intent.intentRef,
        actionType: intent.actionType, txid: err.key ? err.key.slice(0, TXID_LENGTH) : null,
        waitedMs: this.inFlightWaitMs });
    }
    const act = step.act;
    const base = act ? this.base(act) : { intentRef: intent.intentRef, actionType: intent.actionType };
    const failure = { code: err?.code ?? 'tool_error', message: messageOf(err),
      ...(err?.field ? { field: err.field } : {}) };
    const recorded = err === step.callError;
    if (step.callError instanceof FrozenInputUnavailable
        || step.callError instanceof FrozenInputUnavailableRetriable) {
      return new ToolOutcome({ ...base, outcome: 'error',
        error: { code: 'frozen_input_unavailable', message: step.callError.message } });
    }
    if (step.callError !== undefined) {
      const e = step.callError;
      const value = e?.error != null ? e.error : { type: e?.name || typeof e, message: messageOf(e) };
      if (this.retriable.some((cls) => e instanceof cls)) {
        return new ToolOutcome({ ...base, outcome: 'released', error: value, recorded });
      }
      if (this.terminal.some((cls) => e instanceof cls)) {
        return new ToolOutcome({ ...base, outcome: 'failed', error: value, recorded });
      }
      return new ToolOutcome({ ...base, outcome: 'unknown', error: value });
    }
    if (step.returned) {
      // The provider acted and intentd could not store it (lease lost to a
      // newer attempt, storage error): the next call finds it by txid.
      return new ToolOutcome({ ...base, outcome: step.found ? 'recovered' : 'executed',
        replay: step.found, result: step.result, error: failure, recorded: false,
        recovering: act.recovering });
    }
    if (!(err instanceof IntentdError)) failure.code = 'tool_error';
    return new ToolOutcome({ ...base, outcome: 'error', error: failure });
  }
}

/** A guarded tool: `await guardTool(spec).run(args, context)` → ToolOutcome. */
export function guardTool(spec) {
  return new GuardedTool(spec);
}
