//===- File.h - Whole-file reads for the runtime's loaders -----*- C++ -*-===//
#ifndef FSDP_RUNTIME_SUPPORT_FILE_H
#define FSDP_RUNTIME_SUPPORT_FILE_H

#include "runtime/support/Status.h"

#include <string>

namespace fsdp {

/// Reads the file at `path` into `out`; the error says "PATH: cannot open
/// <what>".
Status readFile(const std::string &path, std::string &out,
                const std::string &what = "the file");

} // namespace fsdp

#endif // FSDP_RUNTIME_SUPPORT_FILE_H
