#include "socket_util.h"

#include <cerrno>

namespace kiln::protocol::detail {

namespace {

// Runs one ZeroMQ call again while a signal interrupts it. A signal (the
// SIGTERM that stops a daemon) can land inside any call, not only the
// poll: a send or a non-blocking receive checks its command mailbox first
// and fails with EINTR before it takes or gives a frame, so calling it
// again loses nothing. The caller's loop sees its stop flag right after.
template <typename F>
auto retryOnSignal(F&& call) {
  for (;;) {
    try {
      return call();
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) throw;
    }
  }
}

}  // namespace

bool sendFrames(zmq::socket_t& socket, const std::string* routingId,
                const Frames& frames) {
  auto sendOne = [&](zmq::const_buffer b, zmq::send_flags f) {
    return retryOnSignal([&] { return socket.send(b, f); }).has_value();
  };
  try {
    auto flags = zmq::send_flags::dontwait | zmq::send_flags::sndmore;
    if (routingId && !sendOne(zmq::buffer(*routingId), flags)) return false;
    for (size_t i = 0; i < frames.size(); ++i) {
      auto f = i + 1 < frames.size() ? flags : zmq::send_flags::dontwait;
      // After the first frame ZeroMQ guarantees the rest of the message
      // is accepted as a whole, so a false here cannot leave a half message.
      if (!sendOne(zmq::buffer(frames[i]), f)) return false;
    }
    return true;
  } catch (const zmq::error_t& e) {
    if (e.num() == EHOSTUNREACH) return false;
    throw TransportError(std::string("sending a message: ") + e.what());
  }
}

std::optional<std::vector<zmq::message_t>> tryReceive(zmq::socket_t& socket) {
  // Part by part rather than zmq::recv_multipart, so that a signal between
  // two parts does not drop the parts already taken.
  std::vector<zmq::message_t> parts;
  for (;;) {
    zmq::message_t part;
    auto got = retryOnSignal(
        [&] { return socket.recv(part, zmq::recv_flags::dontwait); });
    if (!got) {
      if (parts.empty()) return std::nullopt;
      // Not reached: the parts of a message arrive together.
      throw TransportError("a multipart message ended early");
    }
    bool more = part.more();
    parts.push_back(std::move(part));
    if (!more) return parts;
  }
}

void setKey(zmq::socket_t& socket, int option, const std::string& key) {
  checkZ85Key(key, "CurveZMQ key option");
  if (zmq_setsockopt(socket.handle(), option, key.c_str(), key.size() + 1) != 0)
    throw zmq::error_t();
}

void setCommonOptions(zmq::socket_t& socket,
                      std::chrono::milliseconds heartbeat,
                      std::chrono::milliseconds linger) {
  socket.set(zmq::sockopt::linger, static_cast<int>(linger.count()));
  socket.set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(kMaxBodyFrame));
  socket.set(zmq::sockopt::sndhwm, 10000);
  socket.set(zmq::sockopt::rcvhwm, 10000);
  if (heartbeat.count() > 0) {
    socket.set(zmq::sockopt::heartbeat_ivl,
               static_cast<int>(heartbeat.count()));
    socket.set(zmq::sockopt::heartbeat_timeout,
               static_cast<int>(3 * heartbeat.count()));
  }
}

bool waitUntil(std::vector<zmq::pollitem_t>& items, Clock::TimePoint deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - socketClock().now());
  if (left.count() < 0) left = std::chrono::milliseconds(0);
  try {
    return zmq::poll(items, left) > 0;
  } catch (const zmq::error_t& e) {
    // A signal (SIGTERM asking a daemon to stop) is no error: the caller
    // returns to its loop and sees its stop flag at once.
    if (e.num() == EINTR) return false;
    throw;
  }
}

Frames toFrames(const std::vector<zmq::message_t>& parts, size_t first) {
  Frames frames;
  for (size_t i = first; i < parts.size(); ++i)
    frames.push_back(parts[i].to_string());
  return frames;
}

}  // namespace kiln::protocol::detail
