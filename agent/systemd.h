// The small part of systemd's interfaces the agent uses, written against the
// documented protocols (sd_listen_fds(3), sd_notify(3)) so the agent works the
// same with or without systemd and needs no libsystemd.
#pragma once

#include <string>

namespace intentd::agent {

// The listening socket passed by socket activation (LISTEN_PID = our pid and
// LISTEN_FDS >= 1): fd 3, marked close-on-exec; the variables are unset so
// children do not inherit them. Returns -1 when not socket-activated. Fails
// (false) when the passed fd is not a listening Unix stream socket or more
// than one fd was passed.
bool TakeActivatedSocket(int* fd, std::string* error);

// Sends `state` ("READY=1", "STOPPING=1", "WATCHDOG=1", "STATUS=...") to
// $NOTIFY_SOCKET. A no-op returning true when NOTIFY_SOCKET is unset.
bool Notify(const std::string& state);

// The watchdog interval in microseconds when WATCHDOG_USEC applies to this
// process (WATCHDOG_PID unset or ours), else 0.
long long WatchdogUsec();

}  // namespace intentd::agent
