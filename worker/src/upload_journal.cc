// The worker's journal of its direct uploads (upload_journal.h).
#include "upload_journal.h"

#include <sys/stat.h>

#include <filesystem>

#include "kiln/common/error.h"
#include "kiln/common/file.h"
#include "kiln/common/logging.h"

namespace kiln::worker {
namespace {

namespace fs = std::filesystem;
namespace proto = protocol;

constexpr uint64_t kMaxRecord = 16 << 20;  // a StepResult's outputs at most
constexpr uint32_t kMaxFrames = 16;

std::string u32(uint32_t v) {
  std::string s(4, '\0');
  for (int i = 0; i < 4; ++i) s[size_t(i)] = char((v >> (8 * i)) & 0xff);
  return s;
}

uint32_t u32At(const std::string& s, size_t at) {
  if (at + 4 > s.size()) throw FormatError("a journal record is truncated");
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i)
    v |= uint32_t(uint8_t(s[at + size_t(i)])) << (8 * i);
  return v;
}

// A message as a file: the frame count, then each frame's length and bytes.
void writeRecord(const std::string& path, const proto::Message& m) {
  proto::Frames frames = proto::encode(m);
  std::string data = u32(uint32_t(frames.size()));
  for (auto& f : frames) data += u32(uint32_t(f.size())) + f;
  std::string tmp = path + ".new";
  writeFile(tmp, data, true);
  if (::rename(tmp.c_str(), path.c_str()) != 0)
    throwSysError("renaming " + tmp + " to " + path);
}

// The message of a record, decoded and validated as one from the network.
template <typename T>
T readRecord(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throwSysError("stat " + path);
  if (uint64_t(st.st_size) > kMaxRecord)
    throw FormatError(path + " is larger than a journal record may be");
  std::string data = readFile(path);
  uint32_t n = u32At(data, 0);
  if (n == 0 || n > kMaxFrames) throw FormatError(path + ": bad frame count");
  proto::Frames frames;
  size_t at = 4;
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t len = u32At(data, at);
    at += 4;
    if (len > data.size() - at) throw FormatError(path + " is truncated");
    frames.push_back(data.substr(at, len));
    at += len;
  }
  if (at != data.size()) throw FormatError(path + " has trailing bytes");
  auto msg = proto::decode(frames);
  auto* m = std::get_if<T>(&msg);
  if (!m) throw FormatError(path + " holds another kind of record");
  return std::move(*m);
}

}  // namespace

UploadJournal::UploadJournal(std::string dir) : dir_(std::move(dir)) {
  createDirs(dir_);
}

std::string UploadJournal::stepDir(uint64_t step) const {
  return dir_ + "/" + std::to_string(step);
}

void UploadJournal::beginStep(uint64_t step, const std::string& drvPath,
                              const proto::StepResult& result) {
  std::string d = stepDir(step);
  createDirs(d);
  writeFile(d + "/drv.new", drvPath, true);
  if (::rename((d + "/drv.new").c_str(), (d + "/drv").c_str()) != 0)
    throwSysError("renaming " + d + "/drv.new");
  writeRecord(d + "/result", proto::Message(result));
}

std::string UploadJournal::objectPath(uint64_t step,
                                      const std::string& output) const {
  return stepDir(step) + "/" + output + ".object";
}

void UploadJournal::recordGrant(const proto::StageGrant& grant,
                                bool keepProgress) {
  std::string base = stepDir(grant.stepId) + "/" + grant.outputName;
  if (!keepProgress) deletePath(base + ".progress");
  deletePath(base + ".staged");
  proto::StageGrant kept = grant;
  kept.urls.resize(1);  // they expire; one keeps the record valid
  kept.uploadedParts.clear();
  writeRecord(base + ".grant", proto::Message(kept));
}

void UploadJournal::recordProgress(const proto::OutputStaged& m,
                                   bool complete) {
  std::string base = stepDir(m.stepId) + "/" + m.outputName;
  writeRecord(base + (complete ? ".staged" : ".progress"), proto::Message(m));
  if (complete) deletePath(base + ".progress");
}

void UploadJournal::forget(uint64_t step) { deletePath(stepDir(step)); }

std::optional<JournaledStep> UploadJournal::loadStep(
    const std::string& dir, const store::StoreDir& storeDir) {
  JournaledStep s;
  s.drvPath = storeDir.parsePath(readFile(dir + "/drv"));
  s.result = readRecord<proto::StepResult>(dir + "/result");
  if (s.result.status != proto::StepStatus::kSuccess ||
      fs::path(dir).filename() != std::to_string(s.result.stepId))
    throw FormatError(dir + "/result is not this step's successful result");
  for (auto& o : s.result.outputs) {
    std::string base = dir + "/" + o.name;
    if (!pathExists(base + ".grant")) continue;
    try {
      JournaledOutput j;
      j.grant = readRecord<proto::StageGrant>(base + ".grant");
      j.complete = pathExists(base + ".staged");
      if (j.complete || pathExists(base + ".progress"))
        j.progress = readRecord<proto::OutputStaged>(
            base + (j.complete ? ".staged" : ".progress"));
      bool mine = j.grant.stepId == s.result.stepId &&
                  j.grant.outputName == o.name &&
                  (!j.progress || (j.progress->stepId == s.result.stepId &&
                                   j.progress->outputName == o.name &&
                                   j.progress->key == j.grant.key &&
                                   j.progress->info == o.info));
      if (!mine) throw FormatError("records of another output");
      s.outputs.emplace(o.name, std::move(j));
    } catch (const std::exception& e) {
      logWarn("worker: dropping the journal of output " + o.name + " in " +
              dir + ": " + e.what());
    }
  }
  return s;
}

std::map<uint64_t, JournaledStep> UploadJournal::load(
    const store::StoreDir& storeDir, std::chrono::seconds maxAge,
    std::chrono::system_clock::time_point now) {
  std::map<uint64_t, JournaledStep> steps;
  std::error_code ec;
  for (auto& entry : fs::directory_iterator(dir_, ec)) {
    std::string path = entry.path().string();
    std::string why;
    try {
      struct stat st {};
      if (::stat((path + "/result").c_str(), &st) != 0)
        throw Error("no result recorded");
      auto age = now - std::chrono::system_clock::from_time_t(st.st_mtime);
      if (age > maxAge) throw Error("older than the journal keeps");
      auto s = loadStep(path, storeDir);
      steps.emplace(s->result.stepId, std::move(*s));
      continue;
    } catch (const std::exception& e) {
      why = e.what();
    }
    logWarn("worker: removing " + path + " from the upload journal: " + why);
    deletePath(path);
  }
  if (ec)
    logWarn("worker: reading the upload journal " + dir_ + ": " + ec.message());
  return steps;
}

}  // namespace kiln::worker
