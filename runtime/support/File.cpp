#include "runtime/support/File.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace fsdp {

InputFile::~InputFile() {
  if (fd >= 0)
    ::close(fd);
}

Status InputFile::checkOpened(const std::string &what) {
  struct stat st;
  if (::fstat(fd, &st) != 0)
    return Status::error(path + ": cannot open " + what + " (" +
                         std::strerror(errno) + ")");
  if (!S_ISREG(st.st_mode))
    return Status::error(path + ": " + what +
                         " is not a regular file (a device, FIFO, socket "
                         "or directory is never read)");
  bytes = (int64_t)st.st_size;
  links = (int64_t)st.st_nlink;
  return Status::ok();
}

Status InputFile::open(const std::string &name, const std::string &what) {
  path = name;
  // O_NONBLOCK: opening a FIFO without a writer returns at once (and is
  // then refused) instead of blocking; it changes nothing for files.
  fd = ::open(name.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return Status::error(path + ": cannot open " + what + " (" +
                         std::strerror(errno) + ")");
  return checkOpened(what);
}

Status InputFile::openInside(const std::string &base,
                             const std::string &relative,
                             const std::string &what) {
  path = (base.empty() ? std::string(".") : base) + "/" + relative;
  if (relative.empty() || relative[0] == '/')
    return Status::error(path + ": " + what +
                         " must be a relative path inside " +
                         (base.empty() ? "." : base));
  std::vector<std::string> parts;
  for (size_t at = 0; at <= relative.size();) {
    size_t slash = relative.find('/', at);
    if (slash == std::string::npos)
      slash = relative.size();
    std::string part = relative.substr(at, slash - at);
    if (part == "..")
      return Status::error(path + ": " + what + " may not contain '..'");
    if (!part.empty() && part != ".")
      parts.push_back(part);
    at = slash + 1;
  }
  if (parts.empty())
    return Status::error(path + ": " + what + " names no file");
  int dir = ::open(base.empty() ? "." : base.c_str(),
                   O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0)
    return Status::error((base.empty() ? "." : base) + ": cannot open the "
                         "directory of " + what + " (" + std::strerror(errno) +
                         ")");
  std::string walked = base.empty() ? "." : base;
  for (size_t i = 0; i < parts.size(); ++i) {
    walked += "/" + parts[i];
    bool last = i + 1 == parts.size();
    int next = ::openat(dir, parts[i].c_str(),
                        (last ? O_RDONLY | O_NONBLOCK : O_RDONLY | O_DIRECTORY) |
                            O_NOFOLLOW | O_CLOEXEC);
    int err = errno;
    struct stat st;
    bool link = next < 0 &&
                ::fstatat(dir, parts[i].c_str(), &st, AT_SYMLINK_NOFOLLOW) ==
                    0 &&
                S_ISLNK(st.st_mode);
    ::close(dir);
    if (next < 0)
      return Status::error(walked + ": " + what +
                           (link ? " goes through a symlink (data a file "
                                   "names must lie inside its directory)"
                                 : " cannot be opened (" +
                                       std::string(std::strerror(err)) + ")"));
    dir = next;
  }
  fd = dir;
  FSDP_RETURN_IF_ERROR(checkOpened(what));
  if (links > 1)
    return Status::error(path + ": " + what + " has " +
                         std::to_string((long long)links) +
                         " hard links (it may be a file outside the model's "
                         "directory); give it one");
  return Status::ok();
}

Status InputFile::read(int64_t offset, void *dst, int64_t count) const {
  if (offset < 0 || count < 0 || offset > bytes || count > bytes - offset)
    return Status::error(path + ": [" + std::to_string(offset) + ", " +
                         std::to_string(offset + count) + ") lies outside its " +
                         std::to_string(bytes) + " bytes");
  char *p = static_cast<char *>(dst);
  while (count > 0) {
    ssize_t n = ::pread(fd, p, (size_t)std::min<int64_t>(count, 1 << 30),
                        (off_t)offset);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return Status::error(path + ": read failed (" +
                           (n < 0 ? std::string(std::strerror(errno))
                                  : std::string("the file is shorter")) +
                           ")");
    p += n;
    offset += n;
    count -= n;
  }
  return Status::ok();
}

Status readFile(const std::string &path, std::string &out,
                const std::string &what) {
  InputFile in;
  FSDP_RETURN_IF_ERROR(in.open(path, what));
  out.resize((size_t)in.size());
  return in.read(0, out.data(), in.size());
}

Status readFileBelow(const std::string &path, const std::string &base,
                     std::string &out, const std::string &what) {
  if (base.empty())
    return readFile(path, out, what);
  InputFile in;
  std::string below = path.substr(base == "/" ? 1 : base.size() + 1);
  FSDP_RETURN_IF_ERROR(in.openInside(base, below, what));
  out.resize((size_t)in.size());
  return in.read(0, out.data(), in.size());
}

AtomicFile::~AtomicFile() {
  if (fd >= 0)
    ::close(fd);
  if (!tmp.empty())
    ::unlink(tmp.c_str());
}

Status AtomicFile::open(const std::string &target) {
  path = target;
  static std::atomic<unsigned> counter{0};
  // A unique name; O_EXCL refuses one that exists (a planted link too), so
  // a few names are tried before giving up.
  for (int attempt = 0; attempt < 16; ++attempt) {
    std::string name = path + ".tmp." + std::to_string(::getpid()) + "." +
                       std::to_string(counter++);
    fd = ::open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
                                  O_CLOEXEC,
                0644);
    if (fd >= 0) {
      tmp = name;
      return Status::ok();
    }
    if (errno != EEXIST)
      return Status::error(path + ": cannot create a temporary next to it (" +
                           std::strerror(errno) + ")");
  }
  return Status::error(path + ": cannot create a temporary next to it "
                              "(every name tried exists)");
}

Status AtomicFile::write(const void *data, size_t bytes) {
  const char *p = static_cast<const char *>(data);
  while (bytes > 0 && !failed) {
    ssize_t n = ::write(fd, p, bytes);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      failed = true;
      return Status::error(path + ": write failed (" +
                           std::strerror(n < 0 ? errno : ENOSPC) + ")");
    }
    p += n;
    bytes -= (size_t)n;
  }
  return failed ? Status::error(path + ": write failed") : Status::ok();
}

Status AtomicFile::commit() {
  if (fd < 0 || failed)
    return Status::error(path + ": write failed");
  int rc = ::fsync(fd);
  int closed = ::close(fd);
  fd = -1;
  if (rc != 0 || closed != 0)
    return Status::error(path + ": write failed (" + std::strerror(errno) +
                         ")");
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    return Status::error(path +
                         ": exists and is not a regular file; not replacing it");
  if (::rename(tmp.c_str(), path.c_str()) != 0)
    return Status::error(path + ": cannot rename the written file into place (" +
                         std::strerror(errno) + ")");
  tmp.clear();
  return Status::ok();
}

Status writeFileAtomically(const std::string &path, const std::string &text) {
  AtomicFile f;
  FSDP_RETURN_IF_ERROR(f.open(path));
  FSDP_RETURN_IF_ERROR(f.write(text.data(), text.size()));
  return f.commit();
}

} // namespace fsdp
