#include "kiln/protocol/transfer.h"

#include <algorithm>

#include "kiln/common/logging.h"

namespace kiln::protocol {

struct TransferEndpoint::Outgoing {
  TransferHeader header;
  bool upload = false;
  std::unique_ptr<Source> source;
  DoneFn onSent;
  uint64_t credit = 0;    // chunks we may still send
  bool accepted = false;  // a first Credit arrived (before it, we are queued)
  uint64_t seq = 0;
  uint64_t sent = 0;  // bytes
  Clock::time_point lastActivity;
};

struct TransferEndpoint::Incoming {
  TransferHeader header;
  bool upload = false;
  std::unique_ptr<TransferTarget> target;
  HashSink hash{HashAlgo::kSha256};
  uint64_t received = 0;  // bytes
  uint64_t nextSeq = 0;
  uint64_t outstanding = 0;  // credit granted and not yet used
  Clock::time_point lastActivity;
};

TransferEndpoint::TransferEndpoint(SendFn send, AcceptFn accept,
                                   DoneFn onReceived, TransferOptions options)
    : send_(std::move(send)),
      accept_(std::move(accept)),
      onReceived_(std::move(onReceived)),
      options_(options) {
  if (options_.chunkSize == 0 || options_.chunkSize > kMaxDataFrame)
    throw Error("transfer chunk size must be 1.." +
                std::to_string(kMaxDataFrame));
  if (options_.window == 0)
    throw Error("transfer window must be at least 1 chunk");
}

TransferEndpoint::~TransferEndpoint() {
  for (auto& [id, in] : incoming_) in->target->discard("connection closed");
}

uint64_t TransferEndpoint::startSend(bool upload, TransferHeader header,
                                     std::unique_ptr<Source> source,
                                     DoneFn onSent) {
  if (header.transferId == 0) header.transferId = nextId_++;
  if (outgoing_.count(header.transferId))
    throw Error("transfer " + std::to_string(header.transferId) +
                " is already running");
  nextId_ = std::max(nextId_, header.transferId + 1);
  auto out = std::make_unique<Outgoing>();
  out->header = header;
  out->upload = upload;
  out->source = std::move(source);
  out->onSent = std::move(onSent);
  out->lastActivity = clock().now();
  auto id = header.transferId;
  // Send first: an invalid header throws before anything is recorded.
  if (upload)
    send_(UploadOutput{header});
  else
    send_(PathData{header});
  outgoing_.emplace(id, std::move(out));
  return id;
}

bool TransferEndpoint::handle(const Message& msg) {
  if (auto* p = std::get_if<PathData>(&msg)) {
    onHeader(*p, false);
  } else if (auto* u = std::get_if<UploadOutput>(&msg)) {
    onHeader(*u, true);
  } else if (auto* c = std::get_if<Credit>(&msg)) {
    onCredit(*c);
  } else if (auto* ch = std::get_if<Chunk>(&msg)) {
    onChunk(*ch);
  } else if (auto* ab = std::get_if<TransferAbort>(&msg)) {
    onAbort(*ab);
  } else if (auto* ack = std::get_if<Ack>(&msg);
             ack && (ack->subject == MessageType::kPathData ||
                     ack->subject == MessageType::kUploadOutput)) {
    onAck(*ack);
  } else {
    return false;
  }
  return true;
}

// ---- sending ----------------------------------------------------------------

void TransferEndpoint::onCredit(const Credit& c) {
  auto it = outgoing_.find(c.transferId);
  if (it == outgoing_.end()) {
    logDebug("credit for unknown transfer " + std::to_string(c.transferId));
    return;
  }
  it->second->credit += c.chunks;
  it->second->accepted = true;
  it->second->lastActivity = clock().now();
  pump(*it->second);
}

void TransferEndpoint::pump(Outgoing& out) {
  auto id = out.header.transferId;
  auto size = out.header.info.narSize;
  while (out.credit > 0 && out.sent < size) {
    std::string buf(std::min<uint64_t>(options_.chunkSize, size - out.sent),
                    '\0');
    size_t n = 0;
    try {
      n = out.source->read(buf.data(), buf.size());
      if (n == 0)
        throw Error("the NAR ended after " + std::to_string(out.sent) +
                    " bytes, but its size is " + std::to_string(size));
    } catch (const std::exception& e) {
      std::string reason = "reading the NAR of " +
                           out.header.info.path.baseName() + ": " + e.what();
      send_(TransferAbort{id, reason});
      finishOutgoing(id, false, reason);
      return;
    }
    buf.resize(n);
    out.sent += n;
    --out.credit;
    send_(Chunk{id, out.seq++, std::move(buf)});
  }
}

void TransferEndpoint::onAck(const Ack& a) {
  if (!outgoing_.count(a.id)) {
    logDebug("ack for unknown transfer " + std::to_string(a.id));
    return;
  }
  finishOutgoing(a.id, a.ok,
                 a.ok ? "" : "the receiver refused the transfer: " + a.error);
}

void TransferEndpoint::finishOutgoing(uint64_t id, bool ok,
                                      const std::string& error) {
  auto it = outgoing_.find(id);
  if (it == outgoing_.end()) return;
  auto out = std::move(it->second);
  outgoing_.erase(it);
  if (out->onSent) out->onSent(TransferOutcome{id, ok, error});
}

// ---- receiving --------------------------------------------------------------

void TransferEndpoint::onHeader(const TransferHeader& h, bool upload) {
  auto type = upload ? MessageType::kUploadOutput : MessageType::kPathData;
  bool known = incoming_.count(h.transferId) ||
               std::any_of(queued_.begin(), queued_.end(), [&](auto& q) {
                 return q.first.transferId == h.transferId;
               });
  if (known) {
    send_(Ack{type, h.transferId, false, "duplicate transfer id"});
    return;
  }
  if (queued_.size() >= options_.maxQueuedIncoming) {
    send_(Ack{type, h.transferId, false,
              "too many transfers waiting (the receiver's limit is " +
                  std::to_string(options_.maxQueuedIncoming) + ")"});
    return;
  }
  queued_.emplace_back(h, upload);
  activateQueued();
}

void TransferEndpoint::activateQueued() {
  while (incoming_.size() < options_.maxActiveIncoming && !queued_.empty()) {
    auto [h, upload] = std::move(queued_.front());
    queued_.pop_front();
    auto type = upload ? MessageType::kUploadOutput : MessageType::kPathData;
    std::unique_ptr<TransferTarget> target;
    std::string refusal = "refused by the receiver";
    try {
      target = accept_(h, upload);
    } catch (const std::exception& e) {
      refusal = e.what();
    }
    if (!target) {
      send_(Ack{type, h.transferId, false, refusal});
      continue;
    }
    auto in = std::make_unique<Incoming>();
    in->header = h;
    in->upload = upload;
    in->target = std::move(target);
    in->outstanding = options_.window;
    in->lastActivity = clock().now();
    incoming_.emplace(h.transferId, std::move(in));
    send_(Credit{h.transferId, options_.window});
  }
}

void TransferEndpoint::onChunk(const Chunk& c) {
  auto it = incoming_.find(c.transferId);
  if (it == incoming_.end()) {
    logDebug("chunk for unknown transfer " + std::to_string(c.transferId));
    return;
  }
  auto& in = *it->second;
  const auto& info = in.header.info;
  auto fail = [&](const std::string& why) {
    finishIncoming(c.transferId, false,
                   "transfer of " + info.path.baseName() + ": " + why, true);
  };
  if (in.outstanding == 0) return fail("the sender exceeded its credit");
  if (c.seq != in.nextSeq)
    return fail("chunk " + std::to_string(c.seq) + " arrived, expected " +
                std::to_string(in.nextSeq));
  if (c.data.size() > options_.chunkSize)
    return fail("chunk of " + std::to_string(c.data.size()) +
                " bytes exceeds the chunk size " +
                std::to_string(options_.chunkSize));
  if (c.data.size() > info.narSize - in.received)
    return fail("more data than the announced NAR size of " +
                std::to_string(info.narSize) + " bytes");
  try {
    in.target->write(c.data);
  } catch (const std::exception& e) {
    return fail(std::string("writing: ") + e.what());
  }
  in.hash.update(c.data);
  in.received += c.data.size();
  ++in.nextSeq;
  --in.outstanding;
  in.lastActivity = clock().now();
  if (in.received == info.narSize) {
    auto got = in.hash.finish();
    if (!(got == info.narHash))
      return fail("NAR hash mismatch: expected " + info.narHash.toNix32() +
                  ", got " + got.toNix32());
    try {
      in.target->commit(in.header);
    } catch (const std::exception& e) {
      return fail(std::string("registering: ") + e.what());
    }
    in.target.reset();  // committed: nothing left to discard
    finishIncoming(c.transferId, true, "", true);
    return;
  }
  // Top the credit up once half of the window is used: one Credit message
  // per window/2 chunks, never more than `window` chunks in flight.
  if (in.outstanding <= options_.window / 2) {
    auto grant = static_cast<uint32_t>(options_.window - in.outstanding);
    in.outstanding = options_.window;
    send_(Credit{c.transferId, grant});
  }
}

void TransferEndpoint::onAbort(const TransferAbort& a) {
  auto q = std::find_if(queued_.begin(), queued_.end(), [&](auto& e) {
    return e.first.transferId == a.transferId;
  });
  if (q != queued_.end()) {
    queued_.erase(q);
    if (onReceived_)
      onReceived_({a.transferId, false, "the sender aborted: " + a.reason});
    return;
  }
  finishIncoming(a.transferId, false, "the sender aborted: " + a.reason, false);
}

void TransferEndpoint::finishIncoming(uint64_t id, bool ok,
                                      const std::string& error,
                                      bool tellSender) {
  auto it = incoming_.find(id);
  if (it == incoming_.end()) return;
  auto in = std::move(it->second);
  incoming_.erase(it);
  if (!ok) {
    logWarn(error);
    if (in->target) in->target->discard(error);
  }
  if (tellSender) {
    auto type =
        in->upload ? MessageType::kUploadOutput : MessageType::kPathData;
    send_(Ack{type, id, ok, error});
  }
  if (onReceived_) onReceived_({id, ok, error});
  activateQueued();
}

// ---- housekeeping
// -------------------------------------------------------------

void TransferEndpoint::expireIdle() { expireIdle(clock().now()); }

void TransferEndpoint::expireIdle(Clock::time_point now) {
  auto limit = options_.idleTimeout;
  std::vector<uint64_t> outIds, inIds;
  for (auto& [id, o] : outgoing_)
    if (o->accepted && now - o->lastActivity > limit) outIds.push_back(id);
  for (auto& [id, i] : incoming_)
    if (now - i->lastActivity > limit) inIds.push_back(id);
  auto why = [&](const TransferHeader& h) {
    return "transfer of " + h.info.path.baseName() + ": no progress for " +
           std::to_string(limit.count()) + " ms";
  };
  for (auto id : outIds) {
    auto reason = why(outgoing_.at(id)->header);
    send_(TransferAbort{id, reason});
    finishOutgoing(id, false, reason);
  }
  for (auto id : inIds)
    finishIncoming(id, false, why(incoming_.at(id)->header), true);
}

void TransferEndpoint::abortAll(const std::string& reason) {
  while (!outgoing_.empty())
    finishOutgoing(outgoing_.begin()->first, false, reason);
  auto queued = std::move(queued_);
  queued_.clear();
  for (auto& [h, upload] : queued)
    if (onReceived_) onReceived_({h.transferId, false, reason});
  while (!incoming_.empty())
    finishIncoming(incoming_.begin()->first, false, reason, false);
}

}  // namespace kiln::protocol
