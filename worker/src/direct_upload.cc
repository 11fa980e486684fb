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

AutoCloseFD unnamedFile(const std::string& dir) {
  AutoCloseFD fd(::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  if (!fd) throwSysError("creating a temporary file in " + dir);
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

}  // namespace

StagedObject stageOutput(const protocol::StageGrant& grant, int narFd,
                         const std::string& tmpDir, bool corrupt) {
  AutoCloseFD file = unnamedFile(tmpDir);
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
  int64_t size = int64_t(o.fileSize);
  if (grant.uploadId.empty()) {
    putWithRetries(grant.urls.at(0), file.get(), 0, size);
    return o;
  }
  int64_t part = int64_t(grant.partSize);
  size_t parts = size_t((size + part - 1) / part);
  if (parts > grant.urls.size())
    throw Error("the compressed output of " + std::to_string(o.fileSize) +
                " bytes needs " + std::to_string(parts) +
                " parts, the grant has " + std::to_string(grant.urls.size()));
  for (size_t i = 0; i < parts; ++i) {
    int64_t at = int64_t(i) * part;
    std::string etag = putWithRetries(grant.urls[i], file.get(), at,
                                      std::min(part, size - at));
    if (etag.empty())
      throw Error("part " + std::to_string(i + 1) + " of " + grant.key +
                  " came back without an ETag");
    o.etags.push_back(etag);
  }
  return o;
}

}  // namespace kiln::worker
