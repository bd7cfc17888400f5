#include "runtime/support/File.h"

#include <fstream>
#include <sstream>

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

} // namespace fsdp
