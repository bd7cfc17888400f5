//===- Status.h - Error values returned up the runtime's stack ---*- C++
//-*-===//
//
// The runtime never exits or throws: every fallible call returns a Status and
// only a tool's main turns it into a message and an exit code.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_SUPPORT_STATUS_H
#define FSDP_RUNTIME_SUPPORT_STATUS_H

#include <string>
#include <utility>

namespace fsdp {

class Status {
public:
  static Status ok() { return Status(); }
  static Status error(std::string message) {
    Status s;
    s.failed = true;
    s.msg = std::move(message);
    return s;
  }

  bool isOk() const { return !failed; }
  explicit operator bool() const { return !failed; }
  const std::string &message() const { return msg; }

  /// Prefixes the message with context, e.g. the file being read.
  Status &withContext(const std::string &context);

private:
  bool failed = false;
  std::string msg;
};

} // namespace fsdp

/// Returns the Status of `expr` from the enclosing function when it failed.
#define FSDP_RETURN_IF_ERROR(expr)                                             \
  do {                                                                         \
    ::fsdp::Status fsdpStatus_ = (expr);                                       \
    if (!fsdpStatus_)                                                          \
      return fsdpStatus_;                                                      \
  } while (0)

#endif // FSDP_RUNTIME_SUPPORT_STATUS_H
