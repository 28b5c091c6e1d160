// Errors: one class per protocol error code, plus client-side failures.
//
// Every error the client throws is an IntentdError with .code, .message and
// .field (null unless one argument is at fault). The client adds the codes
// "unavailable" (cannot reach the agent), "timeout", "protocol_error" (a
// malformed answer) and "in_flight" (the action helper gave up waiting).
// Retriable and Terminal are thrown by YOUR code inside an action.

export class IntentdError extends Error {
  constructor(message = '', { code, field = null, response = null, cause } = {}) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = new.target.name;
    this.code = code ?? new.target.code ?? 'error';
    this.field = field;
    this.response = response;
  }
}

function codeClass(name, code) {
  const cls = { [name]: class extends IntentdError {} }[name];
  cls.code = code;
  return cls;
}

export const BadRequest = codeClass('BadRequest', 'bad_request');
export const FrameTooLarge = codeClass('FrameTooLarge', 'frame_too_large');
export const UnknownOp = codeClass('UnknownOp', 'unknown_op');
export const UnknownActionType = codeClass('UnknownActionType', 'unknown_action_type');
export const MissingField = codeClass('MissingField', 'missing_field');
export const InvalidField = codeClass('InvalidField', 'invalid_field');
export const PayloadMismatch = codeClass('PayloadMismatch', 'payload_mismatch');
export const NotFound = codeClass('NotFound', 'not_found');
/** A newer attempt took the lease over: it owns the outcome now. */
export const LeaseLost = codeClass('LeaseLost', 'lease_lost');
export const InvalidState = codeClass('InvalidState', 'invalid_state');
export const Forbidden = codeClass('Forbidden', 'forbidden');
export const Overloaded = codeClass('Overloaded', 'overloaded');
/** The agent could not make a write durable; nothing was granted. */
export const StorageError = codeClass('StorageError', 'storage_error');
export const ShuttingDown = codeClass('ShuttingDown', 'shutting_down');
export const Internal = codeClass('Internal', 'internal');
/** The agent's policy refuses this payload (an amount above a limit); the
 *  message names the rule and the allowance. Nothing was frozen. */
export const PolicyRefused = codeClass('PolicyRefused', 'policy_refused');

/** The agent cannot be reached, or the connection broke after a request
 *  that is not safe to resend (amend) was sent. */
export const Unavailable = codeClass('Unavailable', 'unavailable');
/** No answer within timeoutMs; the connection was dropped. */
export const Timeout = codeClass('Timeout', 'timeout');
/** The agent's answer is not what the protocol promises. */
export const ProtocolError = codeClass('ProtocolError', 'protocol_error');

/** Another attempt still holds the lease after waiting: redeliver later. */
export class StillInFlight extends IntentdError {
  static code = 'in_flight';
  constructor(message, { key, retryAfterMs }) {
    super(message);
    this.key = key;
    this.retryAfterMs = retryAfterMs;
  }
}

/** The agent's policy holds the intent for a person's approval (an amount
 *  above approval_above): nothing was granted and your call did not run.
 *  Tell the customer the charge is under review and stop; a later delivery
 *  (after `intentd approve`) executes it; after a denial it replays failed
 *  with the error code "denied". */
export class PendingApproval extends IntentdError {
  static code = 'pending_approval';
  constructor(message, { key, reason, approval }) {
    super(message);
    this.key = key;
    this.reason = reason;
    this.approval = approval;
  }
}

export const ERRORS_BY_CODE = Object.freeze(Object.fromEntries(
  [BadRequest, FrameTooLarge, UnknownOp, UnknownActionType, MissingField, InvalidField,
    PayloadMismatch, NotFound, LeaseLost, InvalidState, Forbidden, Overloaded, StorageError,
    ShuttingDown, Internal, PolicyRefused].map((cls) => [cls.code, cls])));

/** The typed error of an {"ok": false} answer; an unknown code (a newer
 *  agent) gives a plain IntentdError carrying that code. */
export function errorFromResponse(response) {
  const err = response && response.error;
  if (!err || typeof err !== 'object') {
    return new ProtocolError(`error answer without an error object: ${JSON.stringify(response)}`,
      { response });
  }
  const message = typeof err.message === 'string' ? err.message : '';
  const field = typeof err.field === 'string' ? err.field : null;
  const Cls = typeof err.code === 'string' && Object.hasOwn(ERRORS_BY_CODE, err.code)
    ? ERRORS_BY_CODE[err.code] : null;
  if (!Cls) return new IntentdError(message, { code: String(err.code), field, response });
  return new Cls(message, { field, response });
}

/** Throw inside an action when the provider call certainly did NOT take
 *  effect: the action is released (fail, retriable: true) and the error is
 *  rethrown, so the message can be redelivered. `error` is what is stored. */
export class Retriable extends Error {
  constructor(message = '', { error } = {}) {
    super(message);
    this.name = 'Retriable';
    this.error = error;
  }
}

/** Throw inside an action when the provider refused for good: the failure
 *  is stored (fail, retriable: false) and replayed to later attempts. The
 *  helper does not rethrow it: check act.failed and act.error. */
export class Terminal extends Error {
  constructor(message = '', { error } = {}) {
    super(message);
    this.name = 'Terminal';
    this.error = error;
  }
}
