// Errors a tool author throws from the anchor function.

/**
 * Throw from `anchor` to refuse a call: the model asked for something the
 * server does not know or does not allow (an unknown invoice, another
 * tenant's invoice). The tool answers an error with this message and
 * nothing is frozen: `begin` is never sent, so a later call with the right
 * reference starts clean.
 */
export class AnchorRefused extends Error {
  constructor(message) {
    super(message);
    this.name = 'AnchorRefused';
    this.code = 'anchor_refused';
  }
}
