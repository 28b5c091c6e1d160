// What a guarded tool call came to, and the words that tell the model.
//
// A model retries what looks unfinished. So every answer says plainly
// whether the action happened now, had already happened (a replay: do not
// retry), is happening elsewhere (do not retry), or did not happen (what to
// change before calling again). The first word of `text` is the verdict in
// capitals; `toJSON()` is the same for programs (MCP structuredContent).

/**
 * Outcomes, by what the model should do next:
 *   executed     done now; the result is the provider's answer
 *   recovered    an interrupted earlier call had acted: the provider's record
 *                of it, found by txid; nothing done now (replay)
 *   replayed     done by an earlier call: the stored result (replay)
 *   failed       refused for good by the provider, now or earlier (replay
 *                when earlier); a retry returns the same failure
 *   released     the provider surely did not act; calling again is fine
 *   in_progress  another call holds the action; do not retry
 *   pending_approval  the payment policy holds it for a person; nothing done
 *   unknown      the provider call ended without an answer; the next call
 *                with the same arguments checks first and never acts twice
 *   refused      the anchor function refused the arguments; nothing frozen
 *   error        intentd (or the tool) refused or failed before acting
 */
export const OUTCOMES = Object.freeze(['executed', 'recovered', 'replayed', 'failed',
  'released', 'in_progress', 'pending_approval', 'unknown', 'refused', 'error']);

const IS_ERROR = new Set(['failed', 'released', 'unknown', 'refused', 'error']);

// Codes after which the same call may succeed a little later.
const TRANSIENT = new Set(['unavailable', 'timeout', 'storage_error', 'overloaded',
  'shutting_down', 'internal']);

export class ToolOutcome {
  /**
   * @param {object} f
   * @param {string} f.outcome one of OUTCOMES
   * @param {boolean} [f.replay] nothing was done now: it had already happened
   * @param {string} [f.intentRef] @param {string} [f.actionType] @param {string} [f.txid]
   * @param {*} [f.result] the provider's answer, or the stored one
   * @param {object} [f.error] {code, message, field} of intentd or the tool,
   *   or the provider's stored error value (failed, released)
   * @param {string[]} [f.divergedFields] fields where this call's arguments
   *   differ from the frozen intent
   * @param {boolean} [f.recorded] false when intentd could not store the outcome
   * @param {boolean} [f.recovering] executed after an interrupted attempt
   * @param {number} [f.waitedMs] in_progress: how long this call waited
   */
  constructor(f) {
    if (!OUTCOMES.includes(f.outcome)) throw new TypeError(`unknown outcome ${f.outcome}`);
    this.outcome = f.outcome;
    this.replay = Boolean(f.replay);
    this.isError = IS_ERROR.has(f.outcome);
    this.intentRef = f.intentRef ?? null;
    this.actionType = f.actionType ?? null;
    this.txid = f.txid ?? null;
    this.result = f.result;
    this.error = f.error ?? null;
    this.divergedFields = f.divergedFields ?? [];
    this.recorded = f.recorded ?? true;
    this.recovering = Boolean(f.recovering);
    this.waitedMs = f.waitedMs ?? null;
    this.text = modelText(this);
  }

  /** The members a program reads (snake_case, as the protocol spells them). */
  toJSON() {
    const out = {
      outcome: this.outcome, replay: this.replay, is_error: this.isError,
      intent_ref: this.intentRef, action_type: this.actionType, txid: this.txid,
      diverged_fields: this.divergedFields,
    };
    if (this.result !== undefined) out.result = this.result;
    if (this.error !== null) out.error = this.error;
    if (!this.recorded) out.recorded = false;
    return out;
  }
}

function what(o) {
  return o.intentRef ? `${o.actionType} for ${o.intentRef}` : 'this action';
}

/** A message as a sentence: ends with a full stop unless it already ends
 *  with punctuation. */
function sentence(message) {
  const m = String(message ?? '').trim();
  return /[.!?]$/.test(m) ? m : `${m}.`;
}

function json(value) {
  return JSON.stringify(value === undefined ? null : value);
}

function divergence(o, tense) {
  if (o.divergedFields.length === 0) return '';
  const fields = o.divergedFields.join(', ');
  return tense === 'now'
    ? ` Your arguments differed from the ones it was first asked with in: ${fields}; `
      + 'the first ones were used.'
    : ` Your arguments differ from the ones it was first asked with in: ${fields}; `
      + 'the first ones stand (only an operator can amend them).';
}

function errorHint(o) {
  const code = o.error && o.error.code;
  if (code === 'invalid_field' || code === 'missing_field') {
    return 'Correct that argument and call again.';
  }
  if (code === 'payload_mismatch' || code === 'frozen_input_unavailable') {
    return `Call again with the arguments first used for ${o.intentRef}.`;
  }
  if (code === 'forbidden' || code === 'anchor_error') return 'Do not retry.';
  if (code === 'policy_refused') {
    return 'The payment policy refuses this amount: do not retry; tell the user that a '
      + 'person must review it.';
  }
  if (TRANSIENT.has(code)) return 'Try again in a little while with the same arguments.';
  return 'Do not retry as is.';
}

function modelText(o) {
  const w = what(o);
  const noRetry = o.intentRef ? ` Do not call this tool again for ${o.intentRef}.` : '';
  switch (o.outcome) {
    case 'executed':
      return `DONE: ${w} was carried out now (txid ${o.txid}).`
        + (o.recovering ? ' An earlier attempt had been interrupted; the provider was asked '
          + 'again under the same txid.' : '')
        + divergence(o, 'now')
        + (o.recorded ? '' : ` (intentd could not record it: ${o.error.code}; calling again `
          + 'resumes this same action instead of starting a new one.)')
        + `${noRetry}\nResult: ${json(o.result)}`;
    case 'recovered':
      return `ALREADY DONE: ${w} had been carried out by an earlier call that was `
        + 'interrupted; this is the provider\'s record of it, and nothing was done now.'
        + `${divergence(o, 'past')}${noRetry}\nResult: ${json(o.result)}`;
    case 'replayed':
      return `ALREADY DONE (replay): ${w} was carried out by an earlier call; nothing was `
        + 'done now and this is the stored result. It has happened.'
        + `${divergence(o, 'past')}${noRetry}\nResult: ${json(o.result)}`;
    case 'failed':
      return (o.replay
        ? `FAILED EARLIER (replay): the provider refused ${w} for good on an earlier call; `
          + 'nothing was done now.'
        : `FAILED: the provider refused ${w} for good.`)
        + ' Do not retry: a retry returns this same failure.'
        + `${divergence(o, o.replay ? 'past' : 'now')}\nError: ${json(o.error)}`;
    case 'released':
      return `NOT DONE: the provider did not carry out ${w}; nothing happened. You may call `
        + `this tool again later with the same arguments.\nError: ${json(o.error)}`;
    case 'in_progress':
      return `IN PROGRESS: another call is carrying out ${w} right now (waited `
        + `${Math.round((o.waitedMs || 0) / 100) / 10} s). Do not retry and do not try another `
        + 'way; say that it is in progress. A later call with the same arguments returns its '
        + 'result without acting again.';
    case 'pending_approval':
      return `WAITING FOR APPROVAL: ${w} is held for a person's approval `
        + `(${sentence(o.error?.message)}) Nothing was done. Do not retry and do not try another `
        + 'way; tell the user that the charge is being reviewed.';
    case 'unknown':
      return `OUTCOME UNKNOWN: the call to the provider (${w}) ended without an answer; it `
        + 'may or may not have happened. Do not try another way. Calling this tool again with '
        + 'the same arguments is safe: it resumes this same action instead of starting a new one.'
        + `\nError: ${json(o.error)}`;
    case 'refused':
      return `REFUSED: ${sentence(o.error.message)} Nothing was done.`;
    default: {
      const e = o.error || {};
      return `ERROR (${e.code}${e.field ? ` on ${e.field}` : ''}): ${sentence(e.message)} Nothing was `
        + `done. ${errorHint(o)}`;
    }
  }
}
