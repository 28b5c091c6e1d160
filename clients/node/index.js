// intentd-client: the Node.js client of the intentd agent (Node built-ins only).
//
//   import { Client, Retriable } from 'intentd-client';
//   const client = new Client();   // $INTENTD_SOCKET or /run/intentd/intentd.sock
//   const act = await client.action('acme', 'FAT-2026-000123', 'pix.cobranca', payload,
//     async (act) => psp.charge({ idempotencyKey: act.key, txid: act.txid, ...act.payload }));
//   act.replayed, act.response
//
// WhatsApp webhooks (src/webhook.js): verifySignature, messageIds, firstSightings.
export { Client, DEFAULT_SOCKET, backoffDelayMs } from './src/client.js';
export { ActionState, runAction } from './src/action.js';
export {
  MAX_SEEN_BATCH, SIGNATURE_HEADER, firstSightings, messageIds, verifySignature,
} from './src/webhook.js';
export * from './src/errors.js';
