//===- OffloadSpec.h - What --offload asks of each unit ---------*- C++ -*-===//
//
// `--offload=[GLOBAL][,UNIT=MODE...]`, each choice `none`, `optimizer` or
// `all`, optionally `:FRACTION` (in (0, 1]): offload that share of the
// unit's trained elements, its last parameters (whole ones) until the share
// is reached; the rest stays on the device. fsdp-shard splits such a unit's
// trained parameters into two flat buffers (the offloaded part marked
// `fsdp.offload_part`), and fsdp-offload places the marked one; both read
// the flag through this parser, so they cannot disagree.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_PASSES_OFFLOADSPEC_H
#define FSDP_PASSES_OFFLOADSPEC_H

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/StringSet.h"

#include <string>

namespace mlir::fsdp {

struct OffloadChoice {
  std::string mode = "none"; // none, optimizer, all
  double fraction = 1.0;     // of the unit's trained elements
};

struct OffloadSpec {
  OffloadChoice global;
  llvm::StringMap<OffloadChoice> perUnit;

  const OffloadChoice &of(llvm::StringRef unit) const {
    auto it = perUnit.find(unit);
    return it != perUnit.end() ? it->second : global;
  }
  /// Whether any unit offloads anything.
  bool any() const {
    if (global.mode != "none")
      return true;
    for (const auto &e : perUnit)
      if (e.second.mode != "none")
        return true;
    return false;
  }
};

/// Parses `text` against the module's `units`; on a bad item, false and
/// `error` says which. (`auto` is the autotuner's and is refused here.)
inline bool parseOffloadSpec(llvm::StringRef text,
                             const llvm::StringSet<> &units, OffloadSpec &out,
                             std::string &error) {
  auto choice = [&](llvm::StringRef item, OffloadChoice &c) {
    auto [mode, share] = item.split(':');
    if (mode != "none" && mode != "optimizer" && mode != "all")
      return false;
    c.mode = mode.str();
    c.fraction = 1.0;
    if (item.contains(':')) {
      double f = 0;
      if (mode == "none" || share.getAsDouble(f) || !(f > 0 && f <= 1))
        return false;
      c.fraction = f;
    }
    return true;
  };
  out = OffloadSpec();
  llvm::SmallVector<llvm::StringRef> items;
  text.split(items, ',', -1, false);
  for (auto [i, raw] : llvm::enumerate(items)) {
    llvm::StringRef item = raw.trim();
    if (!item.contains('=')) {
      if (i != 0 || !choice(item, out.global)) {
        error = "--offload: '" + item.str() +
                "' is not none, optimizer or all (optionally :FRACTION in "
                "(0, 1]; a global choice comes first, then UNIT=MODE)";
        return false;
      }
      continue;
    }
    auto [name, mode] = item.split('=');
    OffloadChoice c;
    if (!choice(mode, c)) {
      error = "--offload: unit '" + name.str() + "' is given '" + mode.str() +
              "', not none, optimizer or all (optionally :FRACTION in (0, 1])";
      return false;
    }
    if (!units.contains(name)) {
      error = "--offload names unit '" + name.str() +
              "', which is not a unit of this model";
      return false;
    }
    out.perUnit[name] = c;
  }
  return true;
}

} // namespace mlir::fsdp

#endif // FSDP_PASSES_OFFLOADSPEC_H
