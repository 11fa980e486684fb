// CacheStorage for file:// caches, URI parsing and nix-cache-info.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <filesystem>

#include "kiln/common/error.h"
#include "kiln/common/file.h"
#include "kiln/store/binary_cache.h"

namespace kiln::store {
namespace {

/// An upload into a temporary file under the cache root.
class FileUpload : public CacheUpload {
 public:
  explicit FileUpload(std::string root) : root_(std::move(root)) {
    static std::atomic<uint64_t> counter{0};
    createDirs(root_);
    tmp_ = root_ + "/.kiln-upload-" + std::to_string(getpid()) + "-" +
           std::to_string(counter++);
    fd_ = AutoCloseFD(
        open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
    if (!fd_) throwSysError("creating '" + tmp_ + "'");
    sink_ = std::make_unique<FdSink>(fd_.get());
  }
  ~FileUpload() override {
    if (!committed_) {
      sink_.reset();
      fd_.reset();
      unlink(tmp_.c_str());
    }
  }
  void write(std::string_view data) override { sink_->write(data); }
  void commit(const std::string& rel) override {
    checkCacheRelPath(rel);
    sink_->flush();
    if (fsync(fd_.get()) != 0) throwSysError("fsync '" + tmp_ + "'");
    auto dst = root_ + "/" + rel;
    createDirs(dirNameOf(dst));
    if (rename(tmp_.c_str(), dst.c_str()) != 0)
      throwSysError("renaming '" + tmp_ + "' to '" + dst + "'");
    committed_ = true;
  }

 private:
  std::string root_, tmp_;
  AutoCloseFD fd_;
  std::unique_ptr<FdSink> sink_;
  bool committed_ = false;
};

bool parseInt(std::string_view v, int& out) {
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  return !v.empty() && ec == std::errc() && end == v.data() + v.size();
}

}  // namespace

void checkCacheRelPath(std::string_view rel) {
  auto bad = [&](const std::string& why) {
    return FormatError("cache file name '" + std::string(rel) + "' " + why);
  };
  if (rel.empty() || rel[0] == '/') throw bad("is not a relative path");
  size_t pos = 0;
  while (pos <= rel.size()) {
    auto slash = rel.find('/', pos);
    if (slash == std::string_view::npos) slash = rel.size();
    auto part = rel.substr(pos, slash - pos);
    if (part.empty() || part == "." || part == "..")
      throw bad("has an empty, '.' or '..' component");
    pos = slash + 1;
  }
  for (unsigned char c : rel)
    if (c < ' ' || c == 0x7f) throw bad("has a control character");
}

FileCacheStorage::FileCacheStorage(std::string root) : root_(std::move(root)) {
  while (root_.size() > 1 && root_.back() == '/') root_.pop_back();
}

bool FileCacheStorage::exists(const std::string& rel) {
  checkCacheRelPath(rel);
  return pathExists(root_ + "/" + rel);
}

std::optional<std::string> FileCacheStorage::get(const std::string& rel) {
  checkCacheRelPath(rel);
  try {
    return readFile(root_ + "/" + rel);
  } catch (const SysError& e) {
    if (e.errNo() == ENOENT) return std::nullopt;
    throw;
  }
}

std::unique_ptr<Source> FileCacheStorage::open(const std::string& rel) {
  checkCacheRelPath(rel);
  auto path = root_ + "/" + rel;
  AutoCloseFD fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT) return nullptr;
    throwSysError("opening '" + path + "'");
  }
  return std::make_unique<OwnedFdSource>(std::move(fd));
}

std::vector<CacheObject> CacheStorage::listObjects(const std::string&,
                                                  size_t) {
  throw Error("cannot list the cache " + uri() +
              ": use a file:// directory or an s3:// bucket");
}

void CacheStorage::remove(const std::string&) {
  throw Error("cannot delete from the cache " + uri() + ": it is read-only");
}

std::vector<CacheObject> FileCacheStorage::listObjects(
    const std::string& prefix, size_t limit) {
  namespace fs = std::filesystem;
  std::vector<CacheObject> out;
  std::error_code ec;
  if (!fs::exists(root_, ec)) return out;
  for (fs::recursive_directory_iterator it(root_), end; it != end; ++it) {
    if (!it->is_regular_file()) continue;
    auto rel = fs::relative(it->path(), root_).string();
    if (rel.starts_with(".kiln-upload-") || !rel.starts_with(prefix)) continue;
    out.push_back({rel, it->file_size()});
  }
  std::sort(out.begin(), out.end(),
            [](auto& a, auto& b) { return a.key < b.key; });
  if (out.size() > limit) out.resize(limit);
  return out;
}

void FileCacheStorage::remove(const std::string& rel) {
  checkCacheRelPath(rel);
  auto path = root_ + "/" + rel;
  if (unlink(path.c_str()) != 0 && errno != ENOENT)
    throwSysError("deleting '" + path + "'");
}

void CacheStorage::put(const std::string& rel, std::string_view data) {
  auto up = upload();
  up->write(data);
  up->commit(rel);
}

std::unique_ptr<CacheUpload> FileCacheStorage::upload() {
  return std::make_unique<FileUpload>(root_);
}

std::unique_ptr<CacheStorage> openCacheStorage(std::string_view uri) {
  constexpr std::string_view kFile = "file://";
  if (uri.starts_with("http://"))
    return std::make_unique<HttpCacheStorage>(std::string(uri));
  if (uri.starts_with("s3://"))
    return std::make_unique<S3CacheStorage>(std::string(uri));
  if (!uri.starts_with(kFile))
    throw FormatError(
        "cache URI '" + std::string(uri) +
        "' is not supported (kiln reads and writes file:///DIR and "
        "s3://BUCKET?endpoint=..., and reads http://HOST[:PORT])");
  auto path = uri.substr(kFile.size());
  if (path.empty() || path[0] != '/')
    throw FormatError("cache URI '" + std::string(uri) +
                      "' must name an absolute directory (file:///DIR)");
  if (path.find('?') != std::string_view::npos)
    throw FormatError("cache URI '" + std::string(uri) +
                      "' has parameters; use the command's options instead");
  return std::make_unique<FileCacheStorage>(absPath(path));
}

CacheInfo CacheInfo::parse(std::string_view text, std::string_view whence) {
  CacheInfo ci;
  auto bad = [&](const std::string& why) {
    return FormatError("binary cache info '" + std::string(whence) + "' " +
                       why);
  };
  size_t pos = 0;
  while (pos < text.size()) {
    auto eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    auto line = text.substr(pos, eol - pos);
    pos = eol + 1;
    if (line.empty()) continue;
    auto colon = line.find(':');
    if (colon == std::string_view::npos)
      throw bad("has a line that is not 'Key: value': '" + std::string(line) +
                "'");
    auto key = line.substr(0, colon);
    auto value = line.substr(colon + 1);
    while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    while (!value.empty() && value.back() == ' ') value.remove_suffix(1);
    if (key == "StoreDir") {
      ci.storeDir = value;
    } else if (key == "WantMassQuery") {
      ci.wantMassQuery = value == "1";
      ci.hasWantMassQuery = true;
    } else if (key == "Priority") {
      if (!parseInt(value, ci.priority))
        throw bad("has a Priority that is not an integer: '" +
                  std::string(value) + "'");
      ci.hasPriority = true;
    }
  }
  return ci;
}

std::string CacheInfo::render() const {
  std::string s = "StoreDir: " + storeDir + "\n";
  if (hasWantMassQuery)
    s += std::string("WantMassQuery: ") + (wantMassQuery ? "1" : "0") + "\n";
  if (hasPriority) s += "Priority: " + std::to_string(priority) + "\n";
  return s;
}

}  // namespace kiln::store
