#pragma once
/// Binary caches in Nix's layout (spec §7.1): `nix-cache-info`,
/// `<hashpart>.narinfo`, `nar/<nix32 file hash>.nar[.xz|.zst]`, optional
/// `<hashpart>.ls` listings and `log/<drv base name>` build logs.
///
/// The files live behind `CacheStorage` (a `file://` directory today);
/// `BinaryCacheWriter` publishes store paths into one and
/// `BinaryCacheReader` fetches and verifies them. Everything streams: a NAR
/// is compressed while it is hashed and decompressed while it is verified,
/// so memory stays bounded whatever its size.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/common/stream.h"
#include "kiln/store/compression.h"
#include "kiln/store/narinfo.h"
#include "kiln/store/signature.h"
#include "kiln/store/store_path.h"

namespace kiln::store {

/// A file being uploaded into a cache under a name known only at the end.
/// Destroying it without commit() discards it.
class CacheUpload : public Sink {
 public:
  /// Publishes what was written at `rel` atomically (replacing any file).
  virtual void commit(const std::string& rel) = 0;
};

/// One file of a cache as a listing shows it.
struct CacheObject {
  std::string key;    ///< relative to the cache root
  uint64_t size = 0;  ///< bytes
};

/// The files of a cache, addressed by paths relative to its root. Every
/// `rel` is checked: no absolute paths, no empty, "." or ".." components
/// (FormatError). Failures of the medium throw SysError / Error.
class CacheStorage {
 public:
  virtual ~CacheStorage() = default;
  /// Whether `rel` exists.
  virtual bool exists(const std::string& rel) = 0;
  /// The whole of a small file, or nullopt if it does not exist.
  virtual std::optional<std::string> get(const std::string& rel) = 0;
  /// A stream over `rel`, or nullptr if it does not exist.
  virtual std::unique_ptr<Source> open(const std::string& rel) = 0;
  /// Publishes `data` at `rel` atomically (by default through upload()).
  virtual void put(const std::string& rel, std::string_view data);
  /// Starts a streamed upload.
  virtual std::unique_ptr<CacheUpload> upload() = 0;
  /// The cache's URI, for messages (`file:///srv/cache`).
  virtual std::string uri() const = 0;
  /// The files whose key starts with `prefix`, at most `limit` of them, in
  /// lexical order of their keys (garbage collection). By default throws
  /// Error: the medium cannot list.
  virtual std::vector<CacheObject> listObjects(const std::string& prefix,
                                               size_t limit);
  /// Deletes `rel` (a missing one is not an error). By default throws
  /// Error: the medium is read-only.
  virtual void remove(const std::string& rel);
};

/// Throws FormatError unless `rel` is a safe relative path inside a cache.
void checkCacheRelPath(std::string_view rel);

/// A cache in a local directory: writes go to a temporary file that is
/// fsynced and renamed into place, so readers never see partial files.
class FileCacheStorage : public CacheStorage {
 public:
  /// Uses directory `root` (created on first write if missing).
  explicit FileCacheStorage(std::string root);
  bool exists(const std::string& rel) override;
  std::optional<std::string> get(const std::string& rel) override;
  std::unique_ptr<Source> open(const std::string& rel) override;
  std::unique_ptr<CacheUpload> upload() override;
  std::string uri() const override { return "file://" + root_; }
  /// Walks the directory (skipping uploads in progress); a missing root
  /// is an empty cache.
  std::vector<CacheObject> listObjects(const std::string& prefix,
                                       size_t limit) override;
  void remove(const std::string& rel) override;
  const std::string& root() const { return root_; }

 private:
  std::string root_;
};

/// Bounds of an HTTP cache client.
struct HttpCacheLimits {
  /// Connecting, and each send or receive, fails after this long.
  std::chrono::seconds timeout{60};
  uint64_t maxSmallFileBytes = 16 << 20;       ///< get(): narinfo, cache info
  uint64_t maxFileBytes = uint64_t{64} << 30;  ///< open(): a NAR file
  /// S3: files larger than this are uploaded in parts of `partBytes`
  /// (at least 5 MiB, S3's smallest part).
  uint64_t multipartThreshold = uint64_t{64} << 20;
  uint64_t partBytes = uint64_t{16} << 20;
};

/// A read-only cache served over HTTP (`http://HOST[:PORT][/PATH]`, e.g.
/// kiln's web front end or nix-serve): one connection per file; 404 (or
/// 410) means missing, any other status but 200 throws Error, as do
/// network failures and timeouts. put()/upload() throw Error. No TLS.
class HttpCacheStorage : public CacheStorage {
 public:
  /// Parses `uri`; FormatError if it is not http://HOST[:PORT][/PATH]
  /// (no query, user or fragment). Connects on first use.
  explicit HttpCacheStorage(std::string uri, HttpCacheLimits limits = {});
  bool exists(const std::string& rel) override;
  std::optional<std::string> get(const std::string& rel) override;
  std::unique_ptr<Source> open(const std::string& rel) override;
  void put(const std::string& rel, std::string_view data) override;
  std::unique_ptr<CacheUpload> upload() override;
  std::string uri() const override { return uri_; }

 private:
  std::string target(const std::string& rel) const;
  std::string uri_, host_, port_, prefix_;
  HttpCacheLimits limits_;
};

/// A cache in a bucket of an S3 object store:
/// `s3://BUCKET?endpoint=http(s)://HOST[:PORT][&region=REGION]` (region
/// default us-east-1), path-style requests signed with AWS SigV4 by
/// libcurl. Credentials come from AWS_ACCESS_KEY_ID and
/// AWS_SECRET_ACCESS_KEY, else the shared credentials file
/// (AWS_SHARED_CREDENTIALS_FILE, default ~/.aws/credentials; profile
/// AWS_PROFILE or `default`), never from the URI. Bodies go through
/// anonymous temporary files (memory stays bounded); at commit a file is
/// PUT whole, or, past HttpCacheLimits::multipartThreshold, in a multipart
/// upload (aborted if any part fails). 404 means missing; 403 and other
/// statuses and network failures throw Error naming the URI and what to
/// check.
class S3CacheStorage : public CacheStorage {
 public:
  /// Parses `uri` (FormatError naming it) and finds the credentials
  /// (Error when there are none). Connects on first use.
  explicit S3CacheStorage(std::string uri, HttpCacheLimits limits = {});
  /// Throws FormatError (naming `uri`) unless it is a well-formed
  /// `s3://` URI; reads no credentials and connects nowhere.
  static void checkUri(const std::string& uri);
  bool exists(const std::string& rel) override;
  std::optional<std::string> get(const std::string& rel) override;
  std::unique_ptr<Source> open(const std::string& rel) override;
  std::unique_ptr<CacheUpload> upload() override;
  std::string uri() const override { return uri_; }
  /// PUTs the whole of file descriptor `fd` at `rel` (an upload's commit).
  void putFile(const std::string& rel, int fd);
  /// Gives the bucket a policy that lets anyone read and list it (not
  /// write), so that it serves as a plain HTTP binary cache:
  /// `nix copy --from http://HOST:PORT/BUCKET`. Throws Error if refused.
  void makePublicRead();
  /// Copies `from` to `to` inside the bucket on the object store's side
  /// (S3 CopyObject: no byte passes through here). Throws Error if `from`
  /// is missing or the copy fails; objects past 5 GiB (CopyObject's limit)
  /// are refused.
  void copy(const std::string& from, const std::string& to);
  void remove(const std::string& rel) override;
  /// S3 ListObjectsV2, page by page. Throws Error naming the bucket if
  /// it does not exist.
  std::vector<CacheObject> listObjects(const std::string& prefix,
                                       size_t limit) override;
  /// The keys that start with `prefix` (listObjects without the sizes).
  std::vector<std::string> list(const std::string& prefix,
                                size_t limit = 100000);
  /// Deletes every key that starts with `prefix` (a failed or abandoned
  /// step's staging objects); returns how many.
  size_t removePrefix(const std::string& prefix);
  /// A URL that lets its holder, with no credentials, PUT `rel` (and only
  /// that) for `expiry` from `nowSec` (Unix seconds): SigV4 query-string
  /// presigning with this storage's credentials (s3_presign.h).
  std::string presignPut(const std::string& rel, std::chrono::seconds expiry,
                         int64_t nowSec) const;

  /// Starts a multipart upload of `rel`; returns its upload id. Throws
  /// Error if refused.
  std::string startMultipart(const std::string& rel);
  /// A URL that lets its holder PUT part `part` (1..10000) of upload
  /// `uploadId` of `rel`, like presignPut.
  std::string presignPart(const std::string& rel, const std::string& uploadId,
                          int part, std::chrono::seconds expiry,
                          int64_t nowSec) const;
  /// Completes upload `uploadId` of `rel` from its parts' ETags (part 1
  /// first). Throws Error if the store refuses (a part missing, an ETag
  /// that is not the part's).
  void completeMultipart(const std::string& rel, const std::string& uploadId,
                         const std::vector<std::string>& etags);
  /// Aborts upload `uploadId` of `rel` (its parts are dropped); a missing
  /// upload is no error.
  void abortMultipart(const std::string& rel, const std::string& uploadId);
  /// The unfinished multipart uploads (key, upload id) of keys that start
  /// with `prefix`: the first page of the listing (up to 1000).
  std::vector<std::pair<std::string, std::string>> listMultipartUploads(
      const std::string& prefix);
  /// A part of an unfinished multipart upload, as the store lists it.
  struct UploadedPart {
    int number = 0;  ///< 1..10000
    std::string etag;
    uint64_t size = 0;
  };
  /// The parts of upload `uploadId` of `rel` the store holds (S3
  /// ListParts, the first page: up to 1000). Throws Error when the upload
  /// is not known (completed, aborted, or never started).
  std::vector<UploadedPart> listParts(const std::string& rel,
                                      const std::string& uploadId);

  /// A request body: `length` bytes of `fd` from `offset` (advanced as
  /// it is sent).
  struct Body {
    int fd = -1;
    off_t offset = 0;
    off_t length = 0;
  };

 private:
  long request(const std::string& method, const std::string& rel, Body* in,
               int out, std::string* small);
  long send(const std::string& method, const std::string& target, Body* in,
            int out, std::string* small, std::string* etag = nullptr,
            const std::string& extraHeader = "");
  void putMultipart(const std::string& rel, int fd, off_t size);
  /// presignPut and presignPart: a PUT of `rel` with `query`.
  std::string presign(
      const std::string& rel, std::chrono::seconds expiry, int64_t nowSec,
      std::vector<std::pair<std::string, std::string>> query) const;
  std::string uri_, bucket_, endpoint_, region_ = "us-east-1";
  std::string accessKey_, secretKey_;
  HttpCacheLimits limits_;
};

/// Opens a cache URI: `file:///absolute/dir`, `http://HOST[:PORT][/PATH]`
/// (read-only) or `s3://BUCKET?endpoint=...` (S3CacheStorage). FormatError
/// naming the URI otherwise; query parameters of the others are rejected.
std::unique_ptr<CacheStorage> openCacheStorage(std::string_view uri);

/// The `nix-cache-info` file.
struct CacheInfo {
  std::string storeDir = "/nix/store";
  bool wantMassQuery = false;
  int priority = 50;
  bool hasWantMassQuery = false;  ///< whether the file named WantMassQuery
  bool hasPriority = false;       ///< whether the file named Priority

  /// Parses the file; throws FormatError naming `whence` for a line that is
  /// not `Key: value`, a non-integer Priority or a WantMassQuery not 0/1.
  /// Unknown keys are ignored.
  static CacheInfo parse(std::string_view text, std::string_view whence);
  /// `StoreDir`, then `WantMassQuery` and `Priority` when set.
  std::string render() const;
};

/// How a writer publishes paths.
struct CacheWriteOptions {
  std::string compression = "xz";         ///< none, xz or zstd
  int compressionLevel = -1;              ///< codec default when < 0
  const SecretKey* signingKey = nullptr;  ///< borrowed; no signature if null
  bool writeListing = false;              ///< also write `<hashpart>.ls`
  std::optional<int> priority;            ///< written to nix-cache-info if set
  bool wantMassQuery = false;
};

/// Publishes store paths into a cache. Borrows the storage.
class BinaryCacheWriter {
 public:
  /// Throws FormatError for an unsupported compression.
  BinaryCacheWriter(CacheStorage& storage, StoreDir storeDir,
                    CacheWriteOptions options);

  /// Writes `nix-cache-info` if it is missing; throws Error if an existing
  /// one names another store directory.
  void init();
  /// Whether the cache already has a narinfo for `path`.
  bool hasPath(const StorePath& path);
  /// Publishes one path: `dump` writes its NAR into the sink it is given;
  /// the NAR is compressed and hashed on the fly and must match
  /// `meta.narHash`/`meta.narSize` (Error otherwise, nothing published).
  /// The NAR file goes first, the (signed) narinfo last, so a reader never
  /// sees a narinfo whose NAR is missing. `meta`'s URL, compression and
  /// file fields are filled in here; its existing sigs are kept. Returns
  /// the narinfo written.
  NarInfo addPath(NarInfo meta, const std::function<void(Sink&)>& dump);
  /// Writes the build log of derivation `drv` to `log/<drv base name>`.
  void addLog(const StorePath& drv, std::string_view log);

 private:
  void writeListing(const NarInfo& info);

  CacheStorage& storage_;
  StoreDir storeDir_;
  CacheWriteOptions opts_;
};

/// Which paths a reader accepts.
struct CacheTrust {
  /// Trusted keys (matched by name). A path is accepted if it carries a
  /// valid signature by one of them, or if it is content-addressed and
  /// its CA field reproduces its path and content.
  PublicKeys keys;
  /// When false, every path is accepted (like Nix's require-sigs = false).
  bool requireSigs = true;
};

/// Fetches and verifies paths from a cache. Borrows the storage.
class BinaryCacheReader {
 public:
  BinaryCacheReader(CacheStorage& storage, StoreDir storeDir);

  /// Reads `nix-cache-info` (a missing one is allowed, as in Nix) and
  /// checks its StoreDir against ours; throws Error on a mismatch and
  /// FormatError on a malformed file.
  CacheInfo init();
  /// The narinfo of `path`, or nullopt if the cache lacks it. Throws
  /// FormatError for a corrupt narinfo or one that describes another path.
  std::optional<NarInfo> queryNarInfo(const StorePath& path);
  /// Throws Error "… lacks a valid signature" unless `info` is trusted
  /// under `trust` (see CacheTrust). For an unsigned content-addressed
  /// path this checks that the CA field gives the path; its content is
  /// checked against the CA hash when the store registers it (on the bytes
  /// it writes, LocalStore::addFromNar), never by a separate read here.
  /// Self-referencing CA paths need a signature.
  void checkTrusted(const NarInfo& info, const CacheTrust& trust);
  /// Whether `info` carries a valid signature by one of `keys`.
  bool hasValidSignature(const NarInfo& info, const PublicKeys& keys) const;
  /// A source yielding `info`'s NAR, decompressed. Before it hands out the
  /// NAR's last byte it has checked FileHash/FileSize of the file, the
  /// decompressor's end marker and NarHash/NarSize; any mismatch,
  /// truncation or corruption throws FormatError, so a consumer that
  /// registers only complete NARs (LocalStore::addFromNar) never registers
  /// bad data. Throws Error if the NAR file is missing and FormatError for
  /// an unsupported compression.
  std::unique_ptr<Source> narSource(const NarInfo& info);
  /// The build log of derivation `drv`, or nullopt.
  std::optional<std::string> getLog(const StorePath& drv);

  const StoreDir& storeDir() const { return storeDir_; }
  CacheStorage& storage() { return storage_; }
  /// Bounds the decoders of NARs read from now on (default:
  /// DecompressionLimits{}); a NAR needing more fails as corrupt.
  void setDecompressionLimits(const DecompressionLimits& limits) {
    limits_ = limits;
  }

 private:
  CacheStorage& storage_;
  StoreDir storeDir_;
  DecompressionLimits limits_;
};

/// The JSON listing (`.ls`) of the NAR in `nar`:
/// `{"version":1,"root":{…}}` with entries, sizes, narOffset, executable
/// flags and symlink targets, byte-identical to Nix's. Throws FormatError
/// for a malformed NAR.
std::string narListing(Source& nar);

}  // namespace kiln::store
