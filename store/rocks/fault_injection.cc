#include "store/rocks/fault_injection.h"

#include <rocksdb/file_system.h>

#include "store/rocks/impl.h"

namespace intentd::store {
namespace {

rocksdb::IOStatus Injected(FaultInjection* faults, FaultInjection::Fault fault) {
  faults->CountInjected();
  if (fault == FaultInjection::Fault::kNoSpace) {
    return rocksdb::IOStatus::NoSpace("injected: no space left on device");
  }
  return rocksdb::IOStatus::IOError("injected: I/O error");
}

class FaultyFile : public rocksdb::FSWritableFileOwnerWrapper {
 public:
  FaultyFile(std::unique_ptr<rocksdb::FSWritableFile> file, FaultInjection* faults)
      : FSWritableFileOwnerWrapper(std::move(file)), faults_(faults) {}

  rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& options,
                           rocksdb::IODebugContext* dbg) override {
    if (auto f = faults_->write_fault(); f != FaultInjection::Fault::kNone) {
      return Injected(faults_, f);
    }
    return FSWritableFileOwnerWrapper::Append(data, options, dbg);
  }
  rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& options,
                           const rocksdb::DataVerificationInfo& info,
                           rocksdb::IODebugContext* dbg) override {
    if (auto f = faults_->write_fault(); f != FaultInjection::Fault::kNone) {
      return Injected(faults_, f);
    }
    return FSWritableFileOwnerWrapper::Append(data, options, info, dbg);
  }
  rocksdb::IOStatus PositionedAppend(const rocksdb::Slice& data, uint64_t offset,
                                     const rocksdb::IOOptions& options,
                                     rocksdb::IODebugContext* dbg) override {
    if (auto f = faults_->write_fault(); f != FaultInjection::Fault::kNone) {
      return Injected(faults_, f);
    }
    return FSWritableFileOwnerWrapper::PositionedAppend(data, offset, options, dbg);
  }
  rocksdb::IOStatus PositionedAppend(const rocksdb::Slice& data, uint64_t offset,
                                     const rocksdb::IOOptions& options,
                                     const rocksdb::DataVerificationInfo& info,
                                     rocksdb::IODebugContext* dbg) override {
    if (auto f = faults_->write_fault(); f != FaultInjection::Fault::kNone) {
      return Injected(faults_, f);
    }
    return FSWritableFileOwnerWrapper::PositionedAppend(data, offset, options, info, dbg);
  }
  rocksdb::IOStatus Sync(const rocksdb::IOOptions& options, rocksdb::IODebugContext* dbg) override {
    if (auto f = faults_->sync_fault(); f != FaultInjection::Fault::kNone) {
      return Injected(faults_, f);
    }
    return FSWritableFileOwnerWrapper::Sync(options, dbg);
  }
  rocksdb::IOStatus Fsync(const rocksdb::IOOptions& options,
                          rocksdb::IODebugContext* dbg) override {
    if (auto f = faults_->sync_fault(); f != FaultInjection::Fault::kNone) {
      return Injected(faults_, f);
    }
    return FSWritableFileOwnerWrapper::Fsync(options, dbg);
  }

 private:
  FaultInjection* faults_;
};

class FaultyFileSystem : public rocksdb::FileSystemWrapper {
 public:
  FaultyFileSystem(const std::shared_ptr<rocksdb::FileSystem>& target,
                   std::shared_ptr<FaultInjection> faults)
      : FileSystemWrapper(target), faults_(std::move(faults)) {}

  const char* Name() const override { return "intentd.FaultyFileSystem"; }

  rocksdb::IOStatus NewWritableFile(const std::string& name, const rocksdb::FileOptions& options,
                                    std::unique_ptr<rocksdb::FSWritableFile>* result,
                                    rocksdb::IODebugContext* dbg) override {
    return Wrap(target()->NewWritableFile(name, options, result, dbg), result);
  }
  rocksdb::IOStatus ReopenWritableFile(const std::string& name, const rocksdb::FileOptions& options,
                                       std::unique_ptr<rocksdb::FSWritableFile>* result,
                                       rocksdb::IODebugContext* dbg) override {
    return Wrap(target()->ReopenWritableFile(name, options, result, dbg), result);
  }
  rocksdb::IOStatus ReuseWritableFile(const std::string& name, const std::string& old_name,
                                      const rocksdb::FileOptions& options,
                                      std::unique_ptr<rocksdb::FSWritableFile>* result,
                                      rocksdb::IODebugContext* dbg) override {
    return Wrap(target()->ReuseWritableFile(name, old_name, options, result, dbg), result);
  }

 private:
  rocksdb::IOStatus Wrap(rocksdb::IOStatus s, std::unique_ptr<rocksdb::FSWritableFile>* result) {
    if (s.ok()) *result = std::make_unique<FaultyFile>(std::move(*result), faults_.get());
    return s;
  }
  std::shared_ptr<FaultInjection> faults_;
};

}  // namespace

std::shared_ptr<rocksdb::FileSystem> NewFaultInjectionFileSystem(
    std::shared_ptr<rocksdb::FileSystem> base, std::shared_ptr<FaultInjection> faults) {
  return std::make_shared<FaultyFileSystem>(std::move(base), std::move(faults));
}

Status OpenWithFaultInjection(const RocksOptions& options, std::shared_ptr<FaultInjection> faults,
                              std::unique_ptr<RocksStore>* store) {
  if (!faults) return Status::InvalidArgument("OpenWithFaultInjection needs a FaultInjection");
  return OpenRocksStore(options, std::move(faults), store);
}

}  // namespace intentd::store
