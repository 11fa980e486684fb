// EvalStoreWriter: an EvalState's store writer, locked while threaded.
#include "eval_store_writer.h"

#include <mutex>

namespace kiln::eval {

// Serialises every call to the writer it wraps (threads share one writer).
class EvalStoreWriter::Locked : public StoreWriter {
 public:
  explicit Locked(StoreWriter& inner) : inner_(inner) {}
  void addText(const std::string& path, const std::string& contents,
               const std::set<std::string>& references) override {
    std::lock_guard<std::mutex> lock(mu_);
    inner_.addText(path, contents, references);
  }
  void addDerivation(const std::string& path, const std::string& contents,
                     const std::set<std::string>& references,
                     const std::map<std::string, std::string>& outputs) override {
    std::lock_guard<std::mutex> lock(mu_);
    inner_.addDerivation(path, contents, references, outputs);
  }
  void addSource(const std::string& path, const std::string& fsPath, const PathFilter& filter,
                 bool recursive) override {
    std::lock_guard<std::mutex> lock(mu_);
    inner_.addSource(path, fsPath, filter, recursive);
  }
  void useDerivationHashes(const store::DrvHashCache* hashes) override {
    std::lock_guard<std::mutex> lock(mu_);
    inner_.useDerivationHashes(hashes);
  }
  void flush() override {
    std::lock_guard<std::mutex> lock(mu_);
    inner_.flush();
  }

 private:
  StoreWriter& inner_;
  std::mutex mu_;
};

EvalStoreWriter::EvalStoreWriter() = default;
EvalStoreWriter::~EvalStoreWriter() = default;

void EvalStoreWriter::set(StoreWriter* writer) {
  plain_ = writer;
  current_ = writer;
}

void EvalStoreWriter::beginThreads() {
  if (plain_) {
    locked_ = std::make_unique<Locked>(*plain_);
    current_ = locked_.get();
  }
}

void EvalStoreWriter::endThreads() {
  current_ = plain_;
  locked_.reset();
}

}  // namespace kiln::eval
