// The JSON-lines file of `intentd export` and `intentd import`: one JSON
// object per line, every field of every record.
//
//   {"intentd_export":1,"software":"0.1.0","exported_at_ms":N}       first line
//   {"type":"intent","tenant_id":"acme","intent_ref":"FAT-1","action_type":"pix.cobranca",
//    "key":"…","payload":"{…}","rules_version":2,"created_at_ms":N,"updated_at_ms":N,
//    "retain_until_ms":N}
//   {"type":"action","tenant_id":"acme","key":"…","action_type":"pix.cobranca",
//    "intent_ref":"FAT-1","status":"completed","attempt":1,"lease_token":1,
//    "lease_until_ms":N,"response":"{…}","error":"","created_at_ms":N,
//    "updated_at_ms":N,"retain_until_ms":N}
//   {"type":"counter","tenant_id":"acme","name":"pix.cobranca/valor","day":N,
//    "total":N,"count":N,"retain_until_ms":N}          a policy's daily counter
//   {"type":"end","intents":N,"actions":M[,"counters":K]}            last line
//
// Byte strings (ids, and payload, response and error, which the store keeps
// as the exact JSON text it was given) are JSON strings when they are valid
// UTF-8; otherwise the member is NAME_b64 with the bytes in base64 (tenant ids
// may hold any byte). The end line lets import detect a truncated file.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "store/export.h"

namespace intentd::cli {

inline constexpr int kExportFormat = 1;

std::string ExportHeaderLine(int64_t exported_at_ms);
std::string ExportRecordLine(const store::ExportRecord& record);
// "counters" is written only when there are some (files from before them
// have none).
std::string ExportEndLine(uint64_t intents, uint64_t actions, uint64_t counters);

struct ExportLine {
  enum class Kind { kHeader, kRecord, kEnd };
  Kind kind = Kind::kRecord;
  store::ExportRecord record;  // kRecord
  uint64_t end_intents = 0;    // kEnd
  uint64_t end_actions = 0;
  uint64_t end_counters = 0;
};

// Parses one line of the file. False with *error (naming the member at
// fault) for anything but a complete, well-typed object; unknown members are
// errors too, so that nothing is silently dropped.
bool ParseExportLine(std::string_view line, ExportLine* out, std::string* error);

// Standard base64 with padding.
std::string Base64Encode(std::string_view bytes);
bool Base64Decode(std::string_view text, std::string* bytes);

}  // namespace intentd::cli
