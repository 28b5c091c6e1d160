// intentd-client: the Node.js client of the intentd agent (node:net only).
//
//   import { Client, Retriable } from 'intentd-client';
//   const client = new Client();   // $INTENTD_SOCKET or /run/intentd/intentd.sock
//   const act = await client.action('acme', 'FAT-2026-000123', 'pix.cobranca', payload,
//     async (act) => psp.charge({ idempotencyKey: act.key, txid: act.txid, ...act.payload }));
//   act.replayed, act.response
export { Client, DEFAULT_SOCKET, backoffDelayMs } from './src/client.js';
export { ActionState, runAction } from './src/action.js';
export * from './src/errors.js';
