#pragma once
/// CurveZMQ keys: key pairs in Z85 text, their files, and the allow-list of
/// worker public keys the scheduler accepts (docs/protocol.md, "Security").

#include <map>
#include <string>
#include <string_view>

namespace kiln::protocol {

/// A CurveZMQ key pair, each key 40 characters of Z85.
struct CurveKeyPair {
  std::string publicKey;
  std::string secretKey;
};

/// A fresh key pair. Throws Error if libzmq was built without CURVE.
CurveKeyPair generateKeyPair();

/// The public key belonging to a Z85 secret key; throws FormatError if
/// `secretKey` is not a 40-character Z85 key.
std::string publicKeyOf(const std::string& secretKey);

/// Throws FormatError naming `what` unless `key` is 40 characters of Z85.
void checkZ85Key(std::string_view key, std::string_view what);

/// Writes `<dir>/<name>.key` (the secret key, mode 0600, created
/// exclusively) and `<dir>/<name>.pub`. Throws Error if either exists and
/// `overwrite` is false, SysError on I/O failure.
void writeKeyPair(const CurveKeyPair& keys, const std::string& dir,
                  const std::string& name, bool overwrite = false);

/// Reads a key file written by writeKeyPair: one Z85 key; blank lines and
/// lines starting with '#' are ignored. Throws FormatError naming the file.
std::string readKeyFile(const std::string& path);

/// Reads a secret key file and derives its public key. Refuses (Error) a
/// secret key file that others can read.
CurveKeyPair readSecretKeyFile(const std::string& path);

/// The worker public keys allowed to connect, each with a name used in
/// logs (the key itself when none is given).
class AllowList {
 public:
  /// Adds a key; throws FormatError if it is not Z85.
  void add(const std::string& publicKey, std::string name = "");
  /// Parses lines "<z85 public key> [name]"; '#' starts a comment.
  /// `origin` names the source in errors ("workers.allow:3: ...").
  static AllowList parse(std::string_view text, std::string_view origin);
  /// parse() of a file's contents.
  static AllowList readFile(const std::string& path);
  /// The name of an allowed key (Z85), or nullptr.
  const std::string* find(const std::string& publicKey) const;
  size_t size() const { return keys_.size(); }

 private:
  std::map<std::string, std::string> keys_;
};

}  // namespace kiln::protocol
