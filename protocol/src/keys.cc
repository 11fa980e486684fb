#include "kiln/protocol/keys.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kiln/common/error.h"
#include "kiln/common/file.h"

namespace kiln::protocol {
namespace {

constexpr size_t kZ85KeyLen = 40;

bool isZ85Char(char c) {
  static constexpr std::string_view kAlphabet =
      "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/"
      "*?&<>()[]{}@%$#";
  return kAlphabet.find(c) != std::string_view::npos;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())))
    s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
    s.remove_suffix(1);
  return s;
}

// Z85 uses '#', so a line is a comment only if it starts with '#' and is
// not itself a key.
bool isComment(std::string_view line) {
  if (line.front() != '#') return false;
  try {
    checkZ85Key(line, "");
    return false;
  } catch (const FormatError&) {
    return true;
  }
}

std::vector<std::string_view> lines(std::string_view text) {
  std::vector<std::string_view> out;
  for (size_t pos = 0; pos < text.size();) {
    auto nl = std::min(text.find('\n', pos), text.size());
    out.push_back(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return out;
}

std::vector<std::string_view> splitWords(std::string_view line) {
  std::vector<std::string_view> out;
  size_t pos = 0;
  while ((pos = line.find_first_not_of(" \t\r", pos)) !=
         std::string_view::npos) {
    auto end = std::min(line.find_first_of(" \t\r", pos), line.size());
    out.push_back(line.substr(pos, end - pos));
    pos = end;
  }
  return out;
}

void writeExclusive(const std::string& path, const std::string& data,
                    mode_t mode, bool overwrite) {
  if (overwrite) ::unlink(path.c_str());
  AutoCloseFD fd(
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode));
  if (!fd) {
    if (errno == EEXIST)
      throw Error("key file '" + path +
                  "' already exists (use --force to replace it)");
    throwSysError("creating key file '" + path + "'");
  }
  writeAll(fd.get(), data);
  if (::fsync(fd.get()) != 0) throwSysError("fsync '" + path + "'");
}

}  // namespace

void checkZ85Key(std::string_view key, std::string_view what) {
  if (key.size() != kZ85KeyLen)
    throw FormatError(std::string(what) +
                      ": a CurveZMQ key is 40 Z85 characters, got " +
                      std::to_string(key.size()));
  for (char c : key)
    if (!isZ85Char(c))
      throw FormatError(std::string(what) + ": invalid Z85 character '" +
                        std::string(1, c) + "' in a CurveZMQ key");
}

CurveKeyPair generateKeyPair() {
  char pub[41], sec[41];
  if (zmq_curve_keypair(pub, sec) != 0)
    throw Error(std::string("generating a CurveZMQ key pair: ") +
                zmq_strerror(zmq_errno()));
  return {pub, sec};
}

std::string publicKeyOf(const std::string& secretKey) {
  checkZ85Key(secretKey, "secret key");
  char pub[41];
  if (zmq_curve_public(pub, secretKey.c_str()) != 0)
    throw FormatError(std::string("deriving the public key: ") +
                      zmq_strerror(zmq_errno()));
  return pub;
}

void writeKeyPair(const CurveKeyPair& keys, const std::string& dir,
                  const std::string& name, bool overwrite) {
  checkZ85Key(keys.publicKey, "public key");
  checkZ85Key(keys.secretKey, "secret key");
  createDirs(dir);
  auto base = dir + "/" + name;
  if (!overwrite)
    for (auto* ext : {".key", ".pub"})
      if (pathExists(base + ext))
        throw Error("key file '" + base + ext +
                    "' already exists (use --force to replace it)");
  writeExclusive(
      base + ".key",
      "# kiln CurveZMQ secret key: keep it private\n" + keys.secretKey + "\n",
      0600, overwrite);
  writeExclusive(base + ".pub",
                 "# kiln CurveZMQ public key\n" + keys.publicKey + "\n", 0644,
                 overwrite);
}

std::string readKeyFile(const std::string& path) {
  auto text = readFile(path);
  std::string key;
  size_t lineNo = 0;
  for (auto line : lines(text)) {
    ++lineNo;
    line = trim(line);
    auto where = path + ":" + std::to_string(lineNo);
    if (line.empty() || isComment(line)) continue;
    checkZ85Key(line, where);
    if (!key.empty()) throw FormatError(where + ": more than one key");
    key = line;
  }
  if (key.empty()) throw FormatError(path + ": no key in the file");
  return key;
}

CurveKeyPair readSecretKeyFile(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    throwSysError("reading secret key '" + path + "'");
  if (st.st_mode & 077)
    throw Error("secret key '" + path +
                "' is readable by others (chmod 600 it)");
  auto secret = readKeyFile(path);
  return {publicKeyOf(secret), secret};
}

void AllowList::add(const std::string& publicKey, std::string name) {
  checkZ85Key(publicKey, "allowed worker key");
  keys_[publicKey] = name.empty() ? publicKey : std::move(name);
}

AllowList AllowList::parse(std::string_view text, std::string_view origin) {
  AllowList list;
  size_t lineNo = 0;
  for (auto line : lines(text)) {
    ++lineNo;
    auto where = std::string(origin) + ":" + std::to_string(lineNo);
    auto words = splitWords(line);
    if (words.empty() || isComment(words[0])) continue;
    checkZ85Key(words[0], where);
    std::string name;
    size_t rest = 1;
    if (words.size() > 1 && words[1].front() != '#') name = words[rest++];
    if (words.size() > rest && words[rest].front() != '#')
      throw FormatError(
          where + ": unexpected '" + std::string(words[rest]) +
          "' after the key and its name (comments start with '#')");
    if (list.find(std::string(words[0])))
      throw FormatError(where + ": key listed twice");
    list.add(std::string(words[0]), name);
  }
  return list;
}

AllowList AllowList::readFile(const std::string& path) {
  return parse(kiln::readFile(path), path);
}

const std::string* AllowList::find(const std::string& publicKey) const {
  auto it = keys_.find(publicKey);
  return it == keys_.end() ? nullptr : &it->second;
}

}  // namespace kiln::protocol
