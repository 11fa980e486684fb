#pragma once
/// The scheduler ⇄ worker connection over ZeroMQ (docs/protocol.md).
///
/// The scheduler binds a ROUTER (`Server`), workers connect a DEALER
/// (`Client`): builders need no inbound port. Traffic is encrypted and
/// authenticated with CurveZMQ; the server runs a ZAP handler that admits
/// only the worker keys of its `AllowList`. Plain text exists only when
/// `insecurePlaintext` is set explicitly (local development).
///
/// Neither class is thread-safe: each belongs to the thread that runs the
/// connection loop. Malformed messages never surface as exceptions from
/// receive(): they are logged and dropped (and a peer speaking another
/// protocol version gets a Refused it can print).

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "kiln/protocol/keys.h"
#include "kiln/protocol/messages.h"

namespace zmq {
class socket_t;
}

namespace kiln::protocol {

/// Failure to set up or use a socket (bad endpoint, address in use, ...).
class TransportError : public Error {
 public:
  using Error::Error;
};

/// How the scheduler listens.
struct ServerOptions {
  /// ZeroMQ endpoint; "tcp://127.0.0.1:*" picks an ephemeral port.
  std::string bind = "tcp://*:7470";
  /// Without CURVE: anyone who reaches the port may join. Development only.
  bool insecurePlaintext = false;
  /// The scheduler's key pair (required unless insecurePlaintext).
  CurveKeyPair keys;
  /// Worker keys allowed to connect.
  AllowList allowed;
  /// ZeroMQ-level heartbeat that detects dead TCP peers; 0 disables.
  std::chrono::milliseconds zmqHeartbeat{5000};
  /// Largest inbound message frame (ZeroMQ's maxmsgsize): a peer sending
  /// a larger one is disconnected before it is buffered. At most
  /// kMaxBodyFrame.
  size_t maxMessageBytes = kMaxBodyFrame;
};

/// A message that arrived at the server.
struct Received {
  std::string peer;  ///< the ROUTER routing id; pass it to send()
  std::string user;  ///< allow-list name of the worker's key ("" in plain text)
  Message msg;
};

/// The scheduler's side of the worker connections, as the scheduler
/// service uses it: messages from any worker in, messages to one worker
/// out. Implementations: `Server` (ZeroMQ) and `MemoryTransport`
/// (memory_transport.h, for tests without sockets). Not thread-safe unless
/// an implementation says so; the service calls it from its own thread.
class ServerTransport {
 public:
  virtual ~ServerTransport() = default;
  /// Where workers connect (for logs and tests).
  virtual std::string endpoint() const = 0;
  /// Waits up to `timeout` for one valid message; nullopt on timeout, on a
  /// signal, or when `wakeFd` (if not -1; the caller drains it) is
  /// readable. Never throws for a malformed message (it is dropped).
  virtual std::optional<Received> receive(std::chrono::milliseconds timeout,
                                          int wakeFd = -1) = 0;
  /// Queues `msg` for `peer` without blocking; false if the peer is gone or
  /// its queue is full (the message is dropped). Throws FormatError if
  /// `msg` is invalid.
  virtual bool send(const std::string& peer, const Message& msg) = 0;
};

/// The scheduler's endpoint: a ROUTER socket and its ZAP handler thread.
class Server final : public ServerTransport {
 public:
  /// Binds; throws TransportError (bad endpoint, address in use) or
  /// FormatError (bad key). With CURVE, the ZAP handler is running before
  /// the socket accepts anything.
  explicit Server(ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  /// The bound endpoint with the real port ("tcp://127.0.0.1:40123").
  std::string endpoint() const override;
  /// Waits up to `timeout` for one valid message; nullopt on timeout, when
  /// a signal handler interrupted the wait (so a stop flag is seen), or when
  /// `wakeFd` (if not -1; the caller drains it) is readable.
  std::optional<Received> receive(std::chrono::milliseconds timeout,
                                  int wakeFd = -1) override;
  /// Queues `msg` for `peer` without blocking. Returns false if the peer is
  /// not connected or its queue is full (the message is dropped). Throws
  /// FormatError if `msg` is invalid.
  bool send(const std::string& peer, const Message& msg) override;
  /// Connections refused by the ZAP handler so far (unknown keys).
  uint64_t refusedConnections() const;
  /// Messages dropped as malformed or of another protocol version.
  uint64_t droppedMessages() const { return dropped_; }
  /// The socket, to poll it together with others (ZMQ_POLLIN).
  zmq::socket_t& socket();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  uint64_t dropped_ = 0;
};

/// How a worker connects.
struct ClientOptions {
  std::string connect;  ///< e.g. "tcp://scheduler.example.org:7470"
  bool insecurePlaintext = false;
  CurveKeyPair keys;            ///< the worker's key pair (unless plain text)
  std::string serverPublicKey;  ///< the scheduler's public key (Z85)
  std::chrono::milliseconds reconnectMin{100};    ///< first reconnect delay
  std::chrono::milliseconds reconnectMax{10000};  ///< backoff ceiling
  std::chrono::milliseconds zmqHeartbeat{5000};
  /// How long unsent messages are kept when the client is destroyed.
  std::chrono::milliseconds linger{2000};
};

/// The worker's side of its connection to one scheduler, as the worker
/// daemon uses it. Implementations: `Client` (ZeroMQ) and, for tests
/// without sockets, `testing::FakeClientTransport`
/// (tests/support/fake_client_transport.h). Not thread-safe: the daemon
/// calls it from its loop's thread.
class ClientTransport {
 public:
  virtual ~ClientTransport() = default;
  /// Waits up to `timeout` for one valid message; nullopt on timeout, when
  /// a signal handler interrupted the wait (so a stop flag is seen), or
  /// when `wakeFd` (if not -1; the caller drains it) is readable.
  virtual std::optional<Message> receive(std::chrono::milliseconds timeout,
                                         int wakeFd = -1) = 0;
  /// Queues `msg` (kept until connected, up to the high-water mark).
  /// Returns false if the queue is full. Throws FormatError if invalid.
  virtual bool send(const Message& msg) = 0;
  /// Sends frames as they are (another protocol version): tests only.
  virtual bool sendRaw(const Frames& frames) = 0;
  /// Whether a handshake succeeded and no disconnect followed.
  virtual bool connected() = 0;
  /// Why the scheduler rejected the handshake, or "" if it did not.
  virtual std::string handshakeError() = 0;
  /// Drops what was not sent yet when this transport is destroyed.
  virtual void dropUnsent() = 0;
};

/// Opens the worker's connection to the scheduler at `options.connect`;
/// throws TransportError or FormatError as Client's constructor does.
using ClientConnector = std::function<std::unique_ptr<ClientTransport>(
    const ClientOptions& options)>;

/// The worker's endpoint: a DEALER socket that reconnects by itself, and a
/// monitor that tells whether the scheduler accepted the handshake.
class Client final : public ClientTransport {
 public:
  /// Creates the socket and starts connecting; throws TransportError or
  /// FormatError (bad key).
  explicit Client(ClientOptions options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  /// Waits up to `timeout` for one valid message; nullopt on timeout, when
  /// a signal handler interrupted the wait (so a stop flag is seen), or
  /// when `wakeFd` (if not -1; the caller drains it) is readable.
  std::optional<Message> receive(std::chrono::milliseconds timeout,
                                 int wakeFd = -1) override;
  /// Queues `msg` (kept until connected, up to the high-water mark).
  /// Returns false if the queue is full. Throws FormatError if invalid.
  bool send(const Message& msg) override;
  /// Encodes with another protocol version: for tests only.
  bool sendRaw(const Frames& frames) override;
  /// Whether a handshake succeeded and no disconnect followed.
  bool connected() override;
  /// Why the scheduler rejected the handshake (unknown key, mechanism
  /// mismatch), or "" if it did not.
  std::string handshakeError() override;
  /// Drops the messages not sent yet when this client is destroyed
  /// (instead of waiting up to `linger` to send them): for a client the
  /// worker gives up on, to follow another scheduler.
  void dropUnsent() override;
  /// The socket, to poll it together with others (ZMQ_POLLIN).
  zmq::socket_t& socket();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::protocol
