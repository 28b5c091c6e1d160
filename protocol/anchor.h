// Anchors drawn inside the attempt: intent_refs that a redelivery cannot
// reproduce, so that each delivery would freeze a new intent (and get a new
// key) — the bug intentd exists to stop. Config "anchors": "strict" refuses
// them on money action types (ops_intent.cc).
#pragma once

#include <string>
#include <string_view>

namespace intentd::agent {

// When `intent_ref` looks drawn for one attempt: a uuid (with or without
// dashes), a WhatsApp Cloud API message id ("wamid."), or a timestamp (Unix
// seconds or milliseconds, an ISO 8601 date and time). *what names which.
// A business reference (an invoice number, an order id) does not.
bool LooksDrawnInsideTheAttempt(std::string_view intent_ref, std::string* what);

}  // namespace intentd::agent
