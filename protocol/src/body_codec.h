#pragma once
// Per-message body codecs (body_codec.cc). check() throws FormatError naming
// the message and field; put() writes the body frame (data frames of Chunk
// and LogChunk are handled by the caller); get() reads it.

#include "kiln/protocol/messages.h"
#include "wire.h"

namespace kiln::protocol::codec {

void check(const Hello& m);
void put(wire::Writer& w, const Hello& m);
void get(wire::Reader& r, Hello& m);
void check(const Welcome& m);
void put(wire::Writer& w, const Welcome& m);
void get(wire::Reader& r, Welcome& m);
void check(const Refused& m);
void put(wire::Writer& w, const Refused& m);
void get(wire::Reader& r, Refused& m);
void check(const Heartbeat& m);
void put(wire::Writer& w, const Heartbeat& m);
void get(wire::Reader& r, Heartbeat& m);
void check(const BuildStep& m);
void put(wire::Writer& w, const BuildStep& m);
void get(wire::Reader& r, BuildStep& m);
void check(const NeedPaths& m);
void put(wire::Writer& w, const NeedPaths& m);
void get(wire::Reader& r, NeedPaths& m);
void check(const PathData& m);
void put(wire::Writer& w, const PathData& m);
void get(wire::Reader& r, PathData& m);
void check(const Credit& m);
void put(wire::Writer& w, const Credit& m);
void get(wire::Reader& r, Credit& m);
void check(const Chunk& m);
void put(wire::Writer& w, const Chunk& m);
void get(wire::Reader& r, Chunk& m);
void check(const TransferAbort& m);
void put(wire::Writer& w, const TransferAbort& m);
void get(wire::Reader& r, TransferAbort& m);
void check(const LogChunk& m);
void put(wire::Writer& w, const LogChunk& m);
void get(wire::Reader& r, LogChunk& m);
void check(const StepResult& m);
void put(wire::Writer& w, const StepResult& m);
void get(wire::Reader& r, StepResult& m);
void check(const CancelStep& m);
void put(wire::Writer& w, const CancelStep& m);
void get(wire::Reader& r, CancelStep& m);
void check(const UploadOutput& m);
void put(wire::Writer& w, const UploadOutput& m);
void get(wire::Reader& r, UploadOutput& m);
void check(const Ack& m);
void put(wire::Writer& w, const Ack& m);
void get(wire::Reader& r, Ack& m);
void check(const Bye& m);
void put(wire::Writer& w, const Bye& m);
void get(wire::Reader& r, Bye& m);

}  // namespace kiln::protocol::codec
