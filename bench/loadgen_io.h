// Socket helpers shared by the load generator's sessions.
#pragma once

#include <string>
#include <string_view>

namespace intentd::bench {

// Connects to a Unix stream socket and makes the descriptor non-blocking.
// Returns the descriptor, or -1 with *error filled.
int ConnectUnix(const std::string& path, std::string* error);

// Writes all of `data` to the non-blocking `fd`, waiting with poll() while
// the socket buffer is full. False with *error filled when the peer is gone.
bool WriteAll(int fd, std::string_view data, std::string* error);

// Appends what can be read now from the non-blocking `fd` to *buffer.
// Returns false with *error filled on end of stream or a read error; true
// (possibly having read nothing) otherwise.
bool ReadAvailable(int fd, std::string* buffer, std::string* error);

}  // namespace intentd::bench
