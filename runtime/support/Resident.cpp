//===- Resident.cpp - This process's resident memory ----------------------===//
#include "runtime/support/Resident.h"

#include <cstdlib>
#include <fstream>
#include <string>

namespace fsdp {

static int64_t statusField(const char *field) {
  std::ifstream status("/proc/self/status");
  std::string line, prefix = std::string(field) + ":";
  while (std::getline(status, line))
    if (line.rfind(prefix, 0) == 0)
      return std::atoll(line.c_str() + prefix.size()) * 1024; // kB
  return -1;
}

int64_t residentBytes() { return statusField("VmRSS"); }
int64_t peakResidentBytes() { return statusField("VmHWM"); }

} // namespace fsdp
