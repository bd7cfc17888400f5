#include "runtime/support/Status.h"

namespace fsdp {

Status &Status::withContext(const std::string &context) {
  if (failed)
    msg = context + ": " + msg;
  return *this;
}

} // namespace fsdp
