// A tar archive of a folder (tar_writer.h): GNU tar's header layout, written
// from the tree as the store holds it.
#include "tar_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "kiln/common/error.h"
#include "kiln/common/file.h"

namespace kiln::web {

namespace {

constexpr size_t kBlock = 512;

// One 512-byte header. Fields as GNU tar writes them: octal numbers with a
// NUL, "ustar  " magic (GNU), checksum over the header with its own field
// as spaces.
class Header {
 public:
  Header(const std::string& name, char type, uint32_t mode, uint64_t size,
         const std::string& link) {
    put(0, 100, name);
    octal(100, 8, mode);
    octal(108, 8, 0);
    octal(116, 8, 0);
    octal(124, 12, size);
    octal(136, 12, 1);
    b_[156] = type;
    put(157, 100, link);
    std::memcpy(&b_[257], "ustar  ", 8);  // GNU magic + version, NUL-ended
    put(265, 32, "root");
    put(297, 32, "root");
    std::memset(&b_[148], ' ', 8);
    unsigned sum = 0;
    for (unsigned char c : b_) sum += c;
    char text[8];
    std::snprintf(text, sizeof text, "%06o", sum);
    std::memcpy(&b_[148], text, 7);  // six digits, NUL, then the space
  }
  std::string_view bytes() const { return {b_.data(), b_.size()}; }

 private:
  void put(size_t at, size_t len, const std::string& s) {
    std::memcpy(&b_[at], s.data(), std::min(len, s.size()));
  }
  void octal(size_t at, size_t len, uint64_t v) {
    std::string digits(len - 1, '0');
    for (size_t i = len - 1; i-- > 0; v >>= 3) digits[i] = char('0' + (v & 7));
    if (v) throw Error("tar: a number does not fit its header field");
    put(at, len - 1, digits);
  }
  std::array<char, kBlock> b_{};
};

class TarWriter {
 public:
  TarWriter(Sink& out, uint64_t maxBytes) : out_(out), left_(maxBytes) {}

  void tree(const std::string& fsPath, const std::string& name) {
    struct stat st;
    if (::lstat(fsPath.c_str(), &st) != 0)
      throw SysError("reading " + fsPath, errno);
    if (S_ISDIR(st.st_mode)) {
      entry(name + "/", '5', 0755, 0, "");
      std::vector<std::string> names;
      for (auto& e : std::filesystem::directory_iterator(fsPath))
        names.push_back(e.path().filename().string());
      std::sort(names.begin(), names.end());
      for (auto& n : names) tree(fsPath + "/" + n, name + "/" + n);
    } else if (S_ISLNK(st.st_mode)) {
      entry(name, '2', 0777, 0, std::filesystem::read_symlink(fsPath).string());
    } else if (S_ISREG(st.st_mode)) {
      file(fsPath, name, uint64_t(st.st_size), (st.st_mode & S_IXUSR) != 0);
    } else {
      throw Error("tar: " + fsPath + " is not a file, folder or link");
    }
  }

  void finish() { out_.write(std::string(2 * kBlock, '\0')); }

 private:
  // A header, preceded by GNU long-name / long-link entries when needed.
  void entry(const std::string& name, char type, uint32_t mode, uint64_t size,
             const std::string& link) {
    if (link.size() >= 100) longName('K', link);
    if (name.size() >= 100) longName('L', name);
    out_.write(Header(name.substr(0, 99), type, mode, size, link.substr(0, 99))
                   .bytes());
  }

  void longName(char type, const std::string& text) {
    std::string data = text + '\0';
    out_.write(Header("././@LongLink", type, 0644, data.size(), "").bytes());
    data.resize((data.size() + kBlock - 1) / kBlock * kBlock, '\0');
    out_.write(data);
  }

  void file(const std::string& fsPath, const std::string& name, uint64_t size,
            bool executable) {
    if (size > left_) throw Error("tar: the sources are larger than the limit");
    left_ -= size;
    entry(name, '0', executable ? 0755 : 0644, size, "");
    AutoCloseFD fd(::open(fsPath.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) throw SysError("opening " + fsPath, errno);
    std::vector<char> buf(1 << 16);
    uint64_t done = 0;
    while (done < size) {
      ssize_t n = ::read(fd.get(), buf.data(),
                         std::min<uint64_t>(buf.size(), size - done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw SysError("reading " + fsPath, errno);
      if (n == 0) throw Error("tar: " + fsPath + " shrank while read");
      out_.write(std::string_view(buf.data(), size_t(n)));
      done += uint64_t(n);
    }
    if (size % kBlock) out_.write(std::string(kBlock - size % kBlock, '\0'));
  }

  Sink& out_;
  uint64_t left_;
};

}  // namespace

void writeTar(const std::string& dir, const std::string& top, Sink& out,
              uint64_t maxBytes) {
  TarWriter w(out, maxBytes);
  w.tree(dir, top);
  w.finish();
}

}  // namespace kiln::web
