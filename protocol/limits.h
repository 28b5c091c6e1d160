// Limits of the socket protocol (docs/protocol.md) that the agent enforces
// and its C++ clients (the CLI, the reconciler) keep to or describe: one
// home, so that a limit and the texts that state it cannot drift apart.
// Header only, below every library that speaks the protocol. The Python and
// Node clients keep their own copies.
#pragma once

#include <cstddef>
#include <cstdint>

namespace intentd::protocol {

// lease_ms (begin, renew, a claiming seen): from 1 s to 1 h; 5 min when
// absent.
inline constexpr int64_t kMinLeaseMs = 1000;
inline constexpr int64_t kMaxLeaseMs = 3600 * 1000;
inline constexpr int64_t kDefaultLeaseMs = 300000;

// A stored result (complete's response, fail's error) as compact JSON: at
// most 32 KiB, so that records stay small and replays cheap.
inline constexpr size_t kMaxResultBytes = 32 * 1024;

// A listing's `limit` (uncertain, pending): from 1 to kMaxListing;
// kDefaultListing when absent.
inline constexpr int64_t kMaxListing = 1000;
inline constexpr int64_t kDefaultListing = 100;

}  // namespace intentd::protocol
