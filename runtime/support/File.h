//===- File.h - Whole-file reads for the runtime's loaders -----*- C++ -*-===//
#ifndef FSDP_RUNTIME_SUPPORT_FILE_H
#define FSDP_RUNTIME_SUPPORT_FILE_H

#include "runtime/support/Status.h"

#include <string>

namespace fsdp {

/// A file open for reading, checked on its descriptor (not its name, which
/// may change between a check and the open): a regular file only, so a
/// FIFO cannot hang a reader and a device (/dev/zero) cannot feed one
/// forever. Closed when dropped.
class InputFile {
public:
  InputFile() = default;
  InputFile(const InputFile &) = delete;
  InputFile &operator=(const InputFile &) = delete;
  ~InputFile();

  /// `path` as the user named it (links followed: the user chose it).
  Status open(const std::string &path, const std::string &what);
  /// `relative`, a path that a file names (ONNX external data) inside
  /// `base`: relative, without "..", no component a symlink, and the file
  /// with one link only (a hard link can reach outside `base` as a symlink
  /// does). fsdp-opt checks external data with it and fsdp-run reads it.
  Status openInside(const std::string &base, const std::string &relative,
                    const std::string &what);
  /// `bytes` at `offset` into `dst`; an error unless all are read.
  Status read(int64_t offset, void *dst, int64_t bytes) const;
  int64_t size() const { return bytes; }
  const std::string &name() const { return path; }

private:
  Status checkOpened(const std::string &what);
  std::string path;
  int fd = -1;
  int64_t bytes = 0, links = 0; // of the opened file (fstat)
};

/// Reads the regular file at `path` into `out` (InputFile::open); the
/// error says "PATH: cannot open <what>" and why.
Status readFile(const std::string &path, std::string &out,
                const std::string &what = "the file");

/// Reads `path` into `out`: as the user named it when `base` is empty
/// (readFile), else as a path a file named, lying below the directory
/// `base` and opened with no link on the way below it
/// (InputFile::openInside).
Status readFileBelow(const std::string &path, const std::string &base,
                     std::string &out, const std::string &what);

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
