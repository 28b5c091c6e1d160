// The store's error values (leveldb-style). No exception leaves the store.
#pragma once

#include <string>
#include <utility>

namespace intentd::store {

class Status {
 public:
  enum class Code {
    kOk,
    kNotFound,
    kConflict,      // the intent changed since the caller read it; retry
    kLeaseLost,     // a newer attempt holds the lease
    kInvalidState,  // the action's state does not allow the operation
    kInvalidArgument,
    kStorageError,  // the write could not be made durable; nothing granted
    kCorruption,    // data on disk cannot be read
    kIncompatible,  // written by a newer on-disk format
    kBusy,          // the store directory is in use by another process
    kRefused,       // an allowance would be passed (store.h, Allowance); nothing written
    kNotSupported,  // an optional feature this store does not have (admin.h)
  };

  Status() = default;
  static Status Ok() { return Status(); }
  static Status NotFound(std::string m) { return Status(Code::kNotFound, std::move(m)); }
  static Status Conflict(std::string m) { return Status(Code::kConflict, std::move(m)); }
  static Status LeaseLost(std::string m) { return Status(Code::kLeaseLost, std::move(m)); }
  static Status InvalidState(std::string m) { return Status(Code::kInvalidState, std::move(m)); }
  static Status InvalidArgument(std::string m) {
    return Status(Code::kInvalidArgument, std::move(m));
  }
  static Status StorageError(std::string m) { return Status(Code::kStorageError, std::move(m)); }
  static Status Corruption(std::string m) { return Status(Code::kCorruption, std::move(m)); }
  static Status Incompatible(std::string m) { return Status(Code::kIncompatible, std::move(m)); }
  static Status Busy(std::string m) { return Status(Code::kBusy, std::move(m)); }
  static Status Refused(std::string m) { return Status(Code::kRefused, std::move(m)); }
  static Status NotSupported(std::string m) { return Status(Code::kNotSupported, std::move(m)); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}
  Code code_ = Code::kOk;
  std::string message_;
};

}  // namespace intentd::store
