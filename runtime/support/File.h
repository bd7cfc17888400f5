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

/// A file written whole or not at all, without trusting the directory it
/// goes in: the bytes go to a temporary created exclusively under a unique
/// name next to `path` (O_CREAT | O_EXCL | O_NOFOLLOW: a symlink someone
/// planted there is never written through), are flushed to disk, and
/// replace `path` only if `path` is absent or a regular file (never a
/// device, a directory or a symlink). Dropped uncommitted, the temporary
/// is removed and `path` is untouched.
class AtomicFile {
public:
  AtomicFile() = default;
  AtomicFile(const AtomicFile &) = delete;
  AtomicFile &operator=(const AtomicFile &) = delete;
  ~AtomicFile();

  Status open(const std::string &path);
  Status write(const void *data, size_t bytes);
  Status commit();

private:
  std::string path, tmp;
  int fd = -1;
  bool failed = false;
};

/// `text` written to `path` with an AtomicFile.
Status writeFileAtomically(const std::string &path, const std::string &text);

} // namespace fsdp

#endif // FSDP_RUNTIME_SUPPORT_FILE_H
