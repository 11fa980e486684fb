// Compressing and PUTting an output to presigned URLs (direct_upload.h).
#include "direct_upload.h"

#include <fcntl.h>
#include <unistd.h>

#include "kiln/common/error.h"
#include "kiln/common/file.h"
#include "kiln/common/logging.h"
#include "kiln/common/stream.h"
#include "kiln/store/compression.h"
#include "kiln/store/s3_presign.h"

namespace kiln::worker {
namespace {

// Writes to a file and hashes what it writes.
class HashedFileSink final : public Sink {
 public:
  explicit HashedFileSink(int fd) : file_(fd), hash_(HashAlgo::kSha256) {}
  void write(std::string_view data) override {
    file_.write(data);
    hash_.write(data);
  }
  std::pair<Hash, uint64_t> finish() {
    file_.flush();
    return hash_.finish();
  }

 private:
  FdSink file_;
  HashingSink hash_;
};

AutoCloseFD createFile(const std::string& path) {
  AutoCloseFD fd(
      ::open(path.c_str(), O_CREAT | O_TRUNC | O_RDWR | O_CLOEXEC, 0600));
  if (!fd) throwSysError("creating " + path);
  return fd;
}

// PUTs one range, up to three times.
std::string putWithRetries(const std::string& url, int fd, int64_t offset,
                           int64_t length) {
  for (int attempt = 1;; ++attempt) {
    try {
      return store::putPresigned(url, fd, offset, length);
    } catch (const Error& e) {
      if (attempt == 3) throw;
      logWarn(std::string("worker: direct upload: ") + e.what() +
              "; trying again");
    }
  }
}

// The number of parts of an object of `size` bytes in parts of `part`.
size_t partCount(uint64_t size, uint64_t part) {
  return size_t((size + part - 1) / part);
}

// PUTs the object in `fd` (`o`: its hash and size; `o.etags`, by part
// index, those of parts already up: "" where one goes up) as `grant` says.
void putObject(const protocol::StageGrant& grant, int fd, StagedObject& o,
               const StageProgress& progress) {
  int64_t size = int64_t(o.fileSize);
  if (grant.uploadId.empty()) {
    putWithRetries(grant.urls.at(0), fd, 0, size);
    o.etags.clear();
    return progress(o, true);
  }
  int64_t part = int64_t(grant.partSize);
  size_t parts = partCount(o.fileSize, grant.partSize);
  if (parts > grant.urls.size())
    throw Error("the compressed output of " + std::to_string(o.fileSize) +
                " bytes needs " + std::to_string(parts) +
                " parts, the grant has " + std::to_string(grant.urls.size()));
  std::vector<std::string> etags = std::move(o.etags);
  etags.resize(parts);
  for (size_t i = 0; i < parts; ++i) {
    if (!etags[i].empty()) continue;  // up already (a resumption)
    int64_t at = int64_t(i) * part;
    etags[i] = putWithRetries(grant.urls[i], fd, at, std::min(part, size - at));
    if (etags[i].empty())
      throw Error("part " + std::to_string(i + 1) + " of " + grant.key +
                  " came back without an ETag");
    // The journal keeps the parts up so far in order: those before the
    // first one missing.
    o.etags.clear();
    for (auto& e : etags) {
      if (e.empty()) break;
      o.etags.push_back(e);
    }
    if (o.etags.size() < parts) progress(o, false);
  }
  o.etags = std::move(etags);
  progress(o, true);
}

}  // namespace

StagedObject stageOutput(const protocol::StageGrant& grant, int narFd,
                         const std::string& objectPath, bool corrupt,
                         const StageProgress& progress) {
  AutoCloseFD file = createFile(objectPath);
  HashedFileSink out(file.get());
  auto compress = store::makeCompressionSink(grant.compression, out);
  std::string buf(256 << 10, '\0');
  for (bool first = true;; first = false) {
    ssize_t n = ::read(narFd, buf.data(), buf.size());
    if (n < 0) throwSysError("reading an output's NAR");
    if (n == 0) break;
    if (first && corrupt) buf[size_t(n) / 2] ^= 0x20;
    compress->write(std::string_view(buf.data(), size_t(n)));
  }
  compress->finish();
  StagedObject o;
  std::tie(o.fileHash, o.fileSize) = out.finish();
  progress(o, false);
  putObject(grant, file.get(), o, progress);
  return o;
}

std::vector<std::string> reusableParts(const protocol::StageGrant& before,
                                       const std::vector<std::string>& etags,
                                       uint64_t fileSize,
                                       const protocol::StageGrant& now) {
  std::vector<std::string> reuse;
  if (now.uploadId.empty() || now.uploadId != before.uploadId ||
      now.partSize != before.partSize || now.key != before.key)
    return reuse;
  size_t parts = partCount(fileSize, now.partSize);
  reuse.resize(std::min(parts, etags.size()));
  for (auto& p : now.uploadedParts) {
    size_t i = p.number - 1;  // 1.. (checked when decoded)
    if (i >= reuse.size()) continue;
    uint64_t want =
        std::min<uint64_t>(now.partSize, fileSize - i * now.partSize);
    if (p.etag == etags[i] && p.size == want) reuse[i] = p.etag;
  }
  return reuse;
}

StagedObject resumeStaging(const protocol::StageGrant& grant,
                           const std::string& objectPath,
                           const StagedObject& done,
                           std::vector<std::string> reuse,
                           const StageProgress& progress) {
  AutoCloseFD file(::open(objectPath.c_str(), O_RDONLY | O_CLOEXEC));
  if (!file) throwSysError("opening " + objectPath);
  HashingSink hash(HashAlgo::kSha256);
  FdSource(file.get()).drainInto(hash);
  auto [h, size] = hash.finish();
  if (!(h == done.fileHash) || size != done.fileSize)
    throw Error(objectPath + " is not the object the journal describes");
  StagedObject o = done;
  o.etags = std::move(reuse);
  putObject(grant, file.get(), o, progress);
  return o;
}

}  // namespace kiln::worker
