// Which arguments the provider call gets: the payload exactly as first sent.
//
// A retried tool call may carry arguments that differ from the first call's
// (the model re-extracted them). The intent was frozen by the first call, so
// the provider must be called with what was frozen, never with this call's
// version. Agents that answer `begin` with `input` (the payload object as
// first sent, every member) say exactly that; older agents do not, and then
// this call's own arguments are only right when they did not diverge.
//
// Never the answer's `payload`: those are the normalized key fields (money
// as integer cents in a string, "18000" for 180.00, Pix keys without
// punctuation), not arguments a provider understands.

/**
 * @param {object} answer  the `begin` answer (an ActionState's `begin`)
 * @param {object} requestPayload  the payload this call sent to `begin`
 * @returns {{input: object, source: 'intentd' | 'request'} | null}
 *   `intentd`: the frozen input from the answer; `request`: this call's own
 *   payload, which matches the frozen one; null: this call diverged and the
 *   agent did not say what was frozen, so nothing is safe to send.
 */
export function frozenInput(answer, requestPayload) {
  const input = answer ? answer.input : undefined;
  if (input !== null && typeof input === 'object' && !Array.isArray(input)) {
    return { input, source: 'intentd' };
  }
  if (answer && answer.diverged) return null;
  return { input: requestPayload, source: 'request' };
}
