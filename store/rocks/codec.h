// On-disk encoding of keys and values (internal to the store).
//
// Keys are length-prefixed so that any byte (NUL included) may appear in a
// tenant, intent_ref or key without two distinct tuples sharing an encoding.
// Every intent and action value starts with a fixed header, read both by the
// compaction filter (retention) and by reads:
//   byte 0      value format (kValueFormat)
//   bytes 1..8  retain_until_ms, int64 little-endian
// followed by the record body.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "store/status.h"
#include "store/store.h"

namespace intentd::store::codec {

inline constexpr uint8_t kValueFormat = 1;
inline constexpr size_t kValueHeaderSize = 9;

// Composite keys.
std::string IntentKey(std::string_view tenant_id, std::string_view intent_ref,
                      std::string_view action_type);
std::string ActionKey(std::string_view tenant_id, std::string_view key);
// Fill the key fields of *intent / *action. false: malformed key.
bool DecodeIntentKey(std::string_view encoded, Intent* intent);
bool DecodeActionKey(std::string_view encoded, Action* action);

// Inbound message records (column family "messages", the `seen` op).
std::string MessageKey(std::string_view tenant_id, std::string_view channel,
                       std::string_view message_id);
bool DecodeMessageKey(std::string_view encoded, MessageRecord* record);

// Lease index (column family "leases"): one entry per started action, all
// tenants together, by lease_until_ms:
//   'A' lease_until tenant key
// lease_until is written big-endian with the sign bit flipped so that byte
// order is numeric order. Format 1 stores also held each entry a second time
// per tenant ('T' tenant lease_until key); opening one drops those
// (open.cc), so Uncertain for one tenant filters this order instead.
std::string LeaseKeyAll(int64_t lease_until_ms, std::string_view tenant_id, std::string_view key);
std::string LeasePrefixAll();
// The first key past every format 1 'T' entry, and the first of them.
inline constexpr char kLeaseTenantOrderBegin[] = "T";
inline constexpr char kLeaseTenantOrderEnd[] = "U";
// Parses an entry. false: malformed.
bool DecodeLeaseKey(std::string_view encoded, int64_t* lease_until_ms, std::string* tenant_id,
                    std::string* key);

// The policy's records (column family "policy"), each kind under its tag:
//   'C' tenant day name: an allowance counter (day ordered, so that one
//       tenant's counters of a day are one range);
//   'P' tenant intent_ref action_type: an intent whose approval is pending
//       (the index of Store::PendingApprovals), deleted when it is decided.
inline constexpr char kCounterTag = 'C';
inline constexpr char kPendingTag = 'P';
std::string CounterPrefix(std::string_view tenant_id, int64_t day);
std::string CounterKey(std::string_view tenant_id, int64_t day, std::string_view name);
bool DecodeCounterKey(std::string_view encoded, Counter* counter);
// Every pending entry (nullopt) or one tenant's.
std::string PendingPrefix(std::optional<std::string_view> tenant_id);
std::string PendingKey(std::string_view tenant_id, std::string_view intent_ref,
                       std::string_view action_type);
// Fills tenant_id, intent_ref and action_type.
bool DecodePendingKey(std::string_view encoded, Intent* intent);
// The header (the intent's own retention) and the intent's created_at_ms.
std::string EncodePendingValue(int64_t created_at_ms, int64_t retain_until_ms);
Status DecodePendingValue(std::string_view value, int64_t* created_at_ms, int64_t* retain_until_ms);

struct ValueHeader {
  uint8_t format = 0;
  int64_t retain_until_ms = 0;
};
// false: shorter than a header. The format is not checked.
bool ReadValueHeader(std::string_view value, ValueHeader* header);

// An intent value ends with its key_id (format 4; one without reads as "0"),
// its input (format 5; one without reads as "") and, only when it has one,
// its approval (format 6).
std::string EncodeIntentValue(const Intent& intent, int64_t retain_until_ms);
std::string EncodeActionValue(const Action& action, int64_t retain_until_ms);
// A message record's value: the header (retain_until_ms from the record),
// then its state and counters and the first sighting's meta.
std::string EncodeMessageValue(const MessageRecord& record);
// A counter's value: the header, then its total and count.
std::string EncodeCounterValue(const Counter& counter, int64_t retain_until_ms);
Status DecodeCounterValue(std::string_view value, Counter* counter, int64_t* retain_until_ms);
// Decode the body into the non-key fields. kCorruption when malformed or of
// an unknown format.
Status DecodeIntentValue(std::string_view value, Intent* intent, int64_t* retain_until_ms);
Status DecodeActionValue(std::string_view value, Action* action, int64_t* retain_until_ms);
Status DecodeMessageValue(std::string_view value, MessageRecord* record);

}  // namespace intentd::store::codec
