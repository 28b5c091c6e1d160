// intentd-client: the Node.js client of the intentd agent (Node built-ins only).
//
//   import { Client, Retriable } from 'intentd-client';
//   const client = new Client();   // $INTENTD_SOCKET or /run/intentd/intentd.sock
//   const act = await client.action('acme', 'FAT-2026-000123', 'pix.cobranca', extract,
//     async (act) => psp.charge({ idempotencyKey: act.key, txid: act.txid,
//                                 amount: act.amountText('valor'),      // "180.00"
//                                 description: act.input.descricao }));
//   act.replayed, act.response
//
// extract: the payload, or a function returning it (the model call), run only
// when the intent is not frozen yet. Charge from act.input and act.amountText /
// act.amountCents; act.payload is the normalized key input (cents).
//
// WhatsApp webhooks (src/webhook.js): verifySignature, messageIds,
// firstSightings, processing.
export { Client, DEFAULT_SOCKET, backoffDelayMs } from './src/client.js';
export { ActionState, runAction } from './src/action.js';
export {
  MAX_MESSAGE_ID_BYTES, MAX_SEEN_BATCH, SIGNATURE_HEADER, firstSightings, messageIds,
  processing, verifySignature,
} from './src/webhook.js';
export * from './src/errors.js';
