// Serving inputs to workers (input_server.h).
#include "input_server.h"

#include <unistd.h>

#include "kiln/common/logging.h"
#include "kiln/store/nar.h"

namespace kiln::scheduler {

namespace proto = protocol;

namespace {

// The NAR of a store path, serialised at the first read (when the worker
// grants credit, at most a few transfers per worker at once) rather than
// when it is asked for: a request for hundreds of inputs then costs the
// service thread nothing up front. Small NARs are held in memory, larger
// ones in an unlinked temporary file.
class LazyNarSource final : public Source {
 public:
  static constexpr uint64_t kInMemoryLimit = 1 << 20;
  LazyNarSource(std::string storePath, uint64_t narSize, std::string tmp)
      : storePath_(std::move(storePath)),
        narSize_(narSize),
        tmp_(std::move(tmp)) {}
  size_t read(char* data, size_t len) override {
    if (!src_) open();
    return src_->read(data, len);
  }

 private:
  void open() {
    if (narSize_ <= kInMemoryLimit) {
      StringSink sink;
      store::dumpPath(storePath_, sink);
      nar_ = std::move(sink.s);
      src_ = std::make_unique<StringSource>(nar_);
      return;
    }
    fd_ = openUnlinkedTemp(tmp_);
    FdSink sink(fd_.get());
    store::dumpPath(storePath_, sink);
    sink.flush();
    if (lseek(fd_.get(), 0, SEEK_SET) < 0) throwSysError("lseek " + tmp_);
    src_ = std::make_unique<FdSource>(fd_.get());
  }

  std::string storePath_;
  uint64_t narSize_;
  std::string tmp_;
  std::string nar_;
  AutoCloseFD fd_;
  std::unique_ptr<Source> src_;
};

}  // namespace

InputServer::InputServer(store::LocalStore& store, WorkerLink& link,
                         ServiceMetrics& metrics, const std::string& tmpDir)
    : store_(store), link_(link), metrics_(metrics), temps_(tmpDir, "in") {}

const proto::PathInfo& InputServer::pathInfo(const store::StorePath& path) {
  std::string key(path.baseName());
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  return cache_.emplace(key, proto::toPathInfo(store_.requirePathInfo(path)))
      .first->second;
}

void InputServer::serve(WorkerConn& to, const proto::NeedPaths& m) {
  // A path we believed it holds is not there (its store changed): believe
  // nothing more of this connection, so the next steps carry all metadata.
  for (auto& p : m.paths)
    if (to.present.count(p.baseName())) {
      logWarn("worker " + to.name + " lacks " + p.baseName() +
              ", which it held; sending full input metadata from now on");
      to.present.clear();
      break;
    }
  for (auto& p : m.paths) {
    proto::TransferHeader h;
    try {
      h.info = pathInfo(p);
    } catch (const store::InvalidPathError&) {
      link_.sendOrWarn(
          to.peer, proto::Ack{proto::MessageType::kNeedPaths, m.stepId, false,
                              "path " + store_.printPath(p) +
                                  " is not in the central store"});
      continue;
    }
    h.stepId = m.stepId;
    uint64_t size = h.info.narSize;
    auto src = std::make_unique<LazyNarSource>(store_.physicalPath(p), size,
                                               temps_.next());
    to.xfer->startSend(false, h, std::move(src),
                       [this, size](const proto::TransferOutcome& o) {
                         if (o.ok)
                           metrics_.addBytesSent(size);
                         else
                           logWarn("input transfer failed: " + o.error);
                       });
  }
}

}  // namespace kiln::scheduler
