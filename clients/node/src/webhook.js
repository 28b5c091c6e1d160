// WhatsApp Cloud API webhooks: check the signature, list the events, keep
// only those seen for the first time (the agent's seen op).
//
// Meta retries a webhook it did not get a 200 for (for days), and may deliver
// one notification more than once: de-duplication is the receiver's job.
//
//   import { verifySignature, firstSightings } from 'intentd-client';
//   if (!verifySignature(appSecret, rawBody, req.headers['x-hub-signature-256'])) → 403
//   // answer 200 now, then:
//   const found = await firstSightings(client, 'acme', JSON.parse(rawBody));
//   for (const event of found) {
//     bot.handle(event.item); // the message (or status) object as Meta sent it
//   }
//   for (const event of found.rejected) log.warn(`dropped ${event.id}: ${event.reason}`);
//
// Which to use when:
// - Plain (the default): at most once into the model. Record the events when
//   the webhook arrives, answer 200 at once, hand only first sightings to the
//   bot. If the process dies after seen and before the bot handled an event,
//   that event is lost (its redelivery reads as a duplicate). Right when a
//   lost message is cheaper than a second model call, or when the processing
//   is quick and the webhook is answered after it.
// - Claim ({ leaseMs }): at least once, never two at a time. Each first
//   sighting carries leaseToken; handle it inside
//   processing(client, tenantId, event, fn), which calls done when fn
//   resolves and release when it rejects (the next delivery then takes the
//   event at once instead of waiting out the lease). If the processor dies first, its lease runs out and the next
//   delivery gets the event again (event.leaseToken > 1). A duplicate arriving
//   while a live claim holds the event is dropped and listed in the result's
//   inProgress (with retryAfterMs). A redelivery must come for this to help:
//   answer Meta only after done (Meta retries what got no 200), and not with
//   200 while inProgress is not empty. Right for the model step when losing a
//   message is not acceptable; pick a lease longer than the processing takes.
// Either way the money is protected by begin/complete (client.action): seen
// only saves the model call in front of it.

import crypto from 'node:crypto';

import { IntentdError, InvalidField, ProtocolError } from './errors.js';

export const SIGNATURE_HEADER = 'x-hub-signature-256';
const SIGNATURE_PREFIX = 'sha256=';
/** Entries of one batch seen the agent accepts. */
export const MAX_SEEN_BATCH = 1000;
/** The longest message id the agent records, in UTF-8 bytes. */
export const MAX_MESSAGE_ID_BYTES = 256;
const DEFAULT_MAX_FRAME_BYTES = 65536;

/**
 * true when headerValue (the X-Hub-Signature-256 header) is "sha256=" and
 * the hex HMAC-SHA256 of rawBody under the app secret.
 *
 * Resolves a bad request to false, never throws for it: a missing header
 * (undefined/null), an empty one, another prefix ("sha1="), a digest of the
 * wrong length or not hex, or an array (a repeated header). The digests are
 * compared with crypto.timingSafeEqual.
 *
 * Throws TypeError for a programming error instead: an empty or missing app
 * secret (every signature would be forgeable), or a body that is not a
 * Buffer/Uint8Array (check the raw bytes as received: JSON.stringify of the
 * parsed body does not match).
 */
export function verifySignature(appSecret, rawBody, headerValue) {
  if (typeof appSecret !== 'string' && !(appSecret instanceof Uint8Array)) {
    throw new TypeError('verifySignature: appSecret must be a string or a Buffer (the app '
      + 'secret from the Meta app dashboard)');
  }
  if (appSecret.length === 0) {
    throw new TypeError('verifySignature: appSecret is empty; refusing to check signatures '
      + 'with an empty key');
  }
  if (!(rawBody instanceof Uint8Array)) {
    throw new TypeError('verifySignature: rawBody must be the request body as received (a '
      + `Buffer), not ${rawBody === null ? 'null' : typeof rawBody}`);
  }
  if (typeof headerValue !== 'string') return false;
  const value = headerValue.trim();
  if (!value.startsWith(SIGNATURE_PREFIX)) return false;
  const received = value.slice(SIGNATURE_PREFIX.length).toLowerCase();
  if (!/^[0-9a-f]*$/.test(received)) return false;
  const expected = crypto.createHmac('sha256', appSecret).update(rawBody).digest('hex');
  const a = Buffer.from(received, 'latin1');
  const b = Buffer.from(expected, 'latin1');
  if (a.length !== b.length) return false; // timingSafeEqual throws on different lengths
  return crypto.timingSafeEqual(a, b);
}

function objects(value) {
  return Array.isArray(value)
    ? value.filter((v) => v !== null && typeof v === 'object' && !Array.isArray(v)) : [];
}

function isObject(value) {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/**
 * Every messages[].id and statuses[].id of a parsed Cloud API webhook body,
 * in order (entries, their changes, a change's messages then its statuses):
 *   { kind: 'message' | 'status', id (the wamid),
 *     key (what seen records: the id of a message, id + ':' + status of a
 *          status, each status being its own event; '' when it has none),
 *     status (null for a message), item (the object as Meta sent it),
 *     metadata (the change's metadata, {} when absent),
 *     contact (a message's sender in contacts, by wa_id, else null),
 *     entryId (the entry's id, the business account, else null) }
 * Tolerant: missing or mistyped members are skipped, changes whose field is
 * not "messages" ignored. Throws TypeError when body is not an object (parse
 * the JSON first).
 */
export function messageIds(body) {
  return events(body).filter((e) => typeof e.item.id === 'string');
}

// messageIds, and the messages and statuses whose id is present but not a
// string (their JSON text as id), for firstSightings to report.
function events(body) {
  const proto = isObject(body) ? Object.getPrototypeOf(body) : undefined;
  if (proto !== Object.prototype && proto !== null) { // what JSON.parse gives
    const what = body === null ? 'null' : Array.isArray(body) ? 'an array'
      : typeof body === 'object' ? `a ${body.constructor?.name ?? 'non-plain object'}`
        : typeof body;
    throw new TypeError(`messageIds: the webhook body must be the parsed JSON object, not ${what}; `
      + 'JSON.parse the raw body first');
  }
  const found = [];
  for (const entry of objects(body.entry)) {
    const entryId = entry.id ?? null;
    for (const change of objects(entry.changes)) {
      if (change.field != null && change.field !== 'messages') continue;
      const { value } = change;
      if (!isObject(value)) continue;
      const metadata = isObject(value.metadata) ? value.metadata : {};
      const contacts = objects(value.contacts);
      for (const msg of objects(value.messages)) {
        if (msg.id == null || msg.id === '') continue;
        const id = typeof msg.id === 'string' ? msg.id : JSON.stringify(msg.id);
        const contact = msg.from == null ? null
          : contacts.find((c) => c.wa_id === msg.from) ?? null;
        found.push({
          kind: 'message', id, key: id, status: null, item: msg, metadata,
          contact, entryId,
        });
      }
      for (const st of objects(value.statuses)) {
        if (st.id == null || st.id === '') continue;
        const id = typeof st.id === 'string' ? st.id : JSON.stringify(st.id);
        const status = typeof st.status === 'string' ? st.status : '';
        found.push({
          kind: 'status', id, key: `${id}:${status}`, status, item: st, metadata,
          contact: null, entryId,
        });
      }
    }
  }
  return found;
}

const jsonBytes = (value) => Buffer.byteLength(JSON.stringify(value), 'utf8');

/** Batches of at most MAX_SEEN_BATCH keys whose request line stays within
 *  the client's frame limit (1000 long wamids exceed 64 KiB). */
export function seenChunks(keys, tenantId, channel, ttlMs, maxFrameBytes, leaseMs) {
  let budget = null;
  if (maxFrameBytes != null) {
    budget = maxFrameBytes - jsonBytes({
      id: 1e19, op: 'seen', tenant_id: tenantId, channel, messages: [], ttl_ms: ttlMs,
      lease_ms: leaseMs,
    });
  }
  const chunks = [];
  let chunk = [];
  let used = 0;
  for (const key of keys) {
    const size = jsonBytes({ message_id: key }) + 1; // and a comma
    if (chunk.length > 0 && (chunk.length >= MAX_SEEN_BATCH
        || (budget !== null && used + size > budget))) {
      chunks.push(chunk);
      chunk = [];
      used = 0;
    }
    chunk.push(key);
    used += size;
  }
  if (chunk.length > 0) chunks.push(chunk);
  return chunks;
}

const isInt = (v) => Number.isSafeInteger(v);

/** Why the agent would refuse to record event's key, or null. */
export function idProblem(event) {
  if (typeof event.item.id !== 'string') {
    return `its id is a JSON ${Array.isArray(event.item.id) ? 'array' : typeof event.item.id}, `
      + 'not a string';
  }
  if (event.key.trim() === '') return 'its id is blank';
  const size = Buffer.byteLength(event.key, 'utf8');
  if (size > MAX_MESSAGE_ID_BYTES) {
    return `its id is ${size} bytes (with the status, for a status event); the agent records `
      + `at most ${MAX_MESSAGE_ID_BYTES}`;
  }
  return null;
}

/** The index in chunk of the one entry an InvalidField answer names
 *  (messages[N] or messages[N].message_id), or -1. */
function refusedEntry(err, chunk) {
  if (!(err instanceof InvalidField) || typeof err.field !== 'string') return -1;
  const m = /^messages\[(\d+)\]/.exec(err.field);
  if (!m || Number(m[1]) >= chunk.length) return -1;
  return Number(m[1]);
}

/** The answers gathered so far: first sightings and live claims held
 *  elsewhere, by key. */
class Found {
  constructor(claim, rejected) {
    this.claim = claim;
    this.firsts = new Map();
    this.busy = new Map();
    this.rejected = rejected;
    this.refused = new Map(); // key -> the agent's reason
  }

  /** When err refuses one entry of chunk by name: records why, drops it
   *  from chunk and returns true (send the rest). */
  refuse(err, chunk) {
    const i = refusedEntry(err, chunk);
    if (i < 0) return false;
    const [key] = chunk.splice(i, 1);
    this.refused.set(key, err.message);
    return true;
  }

  add(chunk, results) {
    if (!Array.isArray(results) || results.length !== chunk.length) {
      throw new ProtocolError(`seen: ${chunk.length} messages sent, the answer's results do not `
        + `match: ${JSON.stringify(results)?.slice(0, 200)}`);
    }
    chunk.forEach((key, i) => {
      const r = results[i];
      if (!isObject(r) || r.message_id !== key || typeof r.first !== 'boolean') {
        throw new ProtocolError(`seen: result ${JSON.stringify(r)?.slice(0, 200)} does not `
          + `answer ${JSON.stringify(key)}`);
      }
      if (r.first) {
        if (this.claim && !isInt(r.lease_token)) {
          throw new ProtocolError('seen: a claimed first sighting without a lease_token: '
            + `${JSON.stringify(r).slice(0, 200)}`);
        }
        this.firsts.set(key, r);
      } else if (this.claim && r.state === 'processing') {
        this.busy.set(key, r);
      }
    });
  }

  sightings(events) {
    const firsts = events.filter((e) => this.firsts.has(e.key)).map((e) => {
      if (!this.claim) return e;
      const r = this.firsts.get(e.key);
      const until = isInt(r.lease_until_ms) ? r.lease_until_ms : null;
      return { ...e, leaseToken: r.lease_token, leaseUntilMs: until };
    });
    const inProgress = events.filter((e) => this.busy.has(e.key)).map((e) => {
      const retry = this.busy.get(e.key).retry_after_ms;
      return { ...e, retryAfterMs: isInt(retry) ? retry : null };
    });
    const rejected = [...this.rejected, ...events.filter((e) => this.refused.has(e.key))
      .map((e) => ({ ...e, reason: this.refused.get(e.key) }))];
    // Not enumerable: the result compares and prints as the plain array of
    // first sightings.
    Object.defineProperty(firsts, 'inProgress', { value: inProgress, enumerable: false });
    Object.defineProperty(firsts, 'rejected', { value: rejected, enumerable: false });
    return firsts;
  }
}

/**
 * The events of body (see messageIds) the agent has not seen before, in
 * order: hand these, and only these, to the bot.
 *
 * One seenBatch call per 1000 events (fewer when the request would exceed
 * the client's frame limit); none when the body has no events. An event
 * repeated inside the body counts once.
 *
 * leaseMs: the claim mode (see "Which to use when" above): each event
 * resolved carries leaseToken (and leaseUntilMs); call
 * client.done(tenantId, channel, event.key, event.leaseToken) once it is
 * handled (LeaseLost from done: the lease expired and another processor took
 * the event over: stop). The array's inProgress property (not enumerable;
 * [] outside the claim mode) lists the events a live claim elsewhere holds,
 * each with retryAfterMs. Without leaseMs each event is recorded as seen
 * before the bot handles it (at most once).
 *
 * An event whose id the agent cannot record (blank, over 256 bytes, not a
 * string, or one it refuses by name) is listed in the array's rejected
 * property (not enumerable) with its reason, and the body's other events
 * are recorded and resolved as usual: log the rejected ones and answer the
 * webhook 200 all the same (a redelivery would be refused again).
 *
 * Otherwise rejects with what seenBatch rejects with (UnknownOp from an agent without
 * the op). When a later batch fails after earlier ones were recorded, the
 * error carries firstSightings: the first sightings of the batches that
 * succeeded, which no redelivery will report as first again (in the claim
 * mode: not before their lease expires).
 */
export async function firstSightings(client, tenantId, body, {
  channel = 'whatsapp', ttlMs, leaseMs,
} = {}) {
  const unique = new Map();
  const rejected = [];
  for (const event of events(body)) {
    const problem = idProblem(event);
    if (problem !== null) rejected.push({ ...event, reason: problem });
    else if (!unique.has(event.key)) unique.set(event.key, event);
  }
  const recorded = [...unique.values()];
  const found = new Found(leaseMs != null, rejected);
  const frame = client.maxFrameBytes === undefined ? DEFAULT_MAX_FRAME_BYTES
    : client.maxFrameBytes;
  // leaseMs only when given: a client wrapper written before the claim
  // variant keeps working in the plain mode.
  const options = leaseMs == null ? { ttlMs } : { ttlMs, leaseMs };
  for (const chunk of seenChunks([...unique.keys()], tenantId, channel, ttlMs, frame, leaseMs)) {
    while (chunk.length > 0) {
      try {
        found.add(chunk, await client.seenBatch(tenantId, channel, chunk, options));
        break;
      } catch (err) {
        if (found.refuse(err, chunk)) continue;
        if (err instanceof IntentdError) err.firstSightings = found.sightings(recorded);
        throw err;
      }
    }
  }
  return found.sightings(recorded);
}

/**
 * Handles one claimed event (firstSightings with leaseMs):
 *   for (const event of await firstSightings(client, 'acme', body, { leaseMs: 120000 })) {
 *     await processing(client, 'acme', event, () => bot.handle(event));
 *   }
 * When fn resolves, done records the event handled, and processing resolves
 * to fn's value. When fn rejects, release gives the claim back so that the
 * next delivery takes the event at once (the money stays protected by
 * begin/complete: a charge started inside is recovered with its own key), and
 * processing rejects with fn's error. LeaseLost means that the lease ran out
 * and another processor took the event over: done rejects with it (that
 * processor owns the outcome now); release ignores it, and ignores an agent
 * it cannot reach (the lease runs out).
 */
export async function processing(client, tenantId, event, fn, { channel = 'whatsapp' } = {}) {
  if (!isInt(event.leaseToken)) {
    throw new TypeError(`processing: event ${JSON.stringify(event.key)} carries no leaseToken; `
      + 'claim it with firstSightings(..., { leaseMs })');
  }
  let value;
  try {
    value = await fn(event);
  } catch (err) {
    try {
      await client.release(tenantId, channel, event.key, event.leaseToken);
    } catch (e) {
      if (!(e instanceof IntentdError)) throw e;
    }
    throw err;
  }
  await client.done(tenantId, channel, event.key, event.leaseToken);
  return value;
}
