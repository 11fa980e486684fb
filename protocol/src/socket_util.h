#pragma once
// Helpers shared by Server and Client: multipart send/receive without
// blocking, CURVE key options, waiting with a deadline.

#include <chrono>
#include <optional>
#include <string>
#include <vector>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "kiln/common/clock.h"
#include "kiln/protocol/messages.h"
#include "kiln/protocol/transport.h"

namespace kiln::protocol::detail {

/// Sends [routingId?][frames...] without blocking; false if the peer is
/// unknown (ROUTER_MANDATORY) or its queue is full.
bool sendFrames(zmq::socket_t& socket, const std::string* routingId,
                const Frames& frames);

/// Receives one multipart message if one is waiting.
std::optional<std::vector<zmq::message_t>> tryReceive(zmq::socket_t& socket);

/// Sets a 40-character Z85 key option.
void setKey(zmq::socket_t& socket, int option, const std::string& key);

/// Options every kiln socket gets: heartbeat, size limit, linger.
void setCommonOptions(zmq::socket_t& socket,
                      std::chrono::milliseconds heartbeat,
                      std::chrono::milliseconds linger);

/// Polls `items` until one is readable or `deadline`; false on timeout or
/// when a signal interrupted the wait (EINTR).
bool waitUntil(std::vector<zmq::pollitem_t>& items, Clock::TimePoint deadline);

/// The clock of the sockets' deadlines: zmq_poll waits in real time, so a
/// deadline for it is read from the real clock.
inline const Clock& socketClock() { return RealClock::instance(); }

/// Converts frames of a received multipart (from `first`) to strings.
Frames toFrames(const std::vector<zmq::message_t>& parts, size_t first);

}  // namespace kiln::protocol::detail
