#include "runtime/support/File.h"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace fsdp {

Status readFile(const std::string &path, std::string &out,
                const std::string &what) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Status::error(path + ": cannot open " + what);
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad())
    return Status::error(path + ": read failed");
  out = ss.str();
  return Status::ok();
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
