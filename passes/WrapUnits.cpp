//===- WrapUnits.cpp - FSDP units from a wrap policy ----------------------===//
//
// Before: fsdp.parameter @h.0.attn.w ... @h.1.attn.w ... @wte.weight
// After (wrap=transformer):
//   fsdp.unit @h.0 {params = [@h.0.attn.w, ...]}
//   fsdp.unit @h.1 {params = [@h.1.attn.w, ...]}
//   fsdp.unit @root {params = [@wte.weight, ...], reshard_after_forward =
//   false}
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "dialect/FsdpOps.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Regex.h"

#include <map>
#include <set>

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPWRAPUNITS
#include "passes/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// A group of parameters that becomes one unit.
struct Group {
  std::string name;
  SmallVector<ParameterOp> params;
};

int64_t elements(ParameterOp p) { return p.getTensorType().getNumElements(); }

/// Whether `path` is `module` or lies below it.
bool within(StringRef path, StringRef module) {
  return path == module ||
         (path.starts_with(module) && path.size() > module.size() &&
          path[module.size()] == '.');
}

/// transformer: the `<prefix>.<index>` family with the most members whose
/// parameter structure (names relative to the block, shapes) agrees.
FailureOr<SmallVector<Group>> transformerGroups(ModuleOp module,
                                                ArrayRef<ParameterOp> params,
                                                StringRef pattern) {
  llvm::Regex block("^(.*[a-zA-Z_])\\.([0-9]+)(\\.|$)");
  std::optional<llvm::Regex> explicitPrefix;
  if (!pattern.empty()) {
    explicitPrefix.emplace(("^(" + pattern + ")$").str());
    std::string error;
    if (!explicitPrefix->isValid(error))
      return module.emitError("invalid --wrap=transformer pattern '")
             << pattern << "': " << error;
  }
  // prefix -> index -> (relative name, shape) structure and parameters.
  std::map<std::string, std::map<int64_t, std::pair<std::set<std::string>,
                                                    SmallVector<ParameterOp>>>>
      families;
  for (ParameterOp p : params) {
    SmallVector<StringRef> m;
    if (!block.match(p.getModulePath(), &m))
      continue;
    if (explicitPrefix && !explicitPrefix->match(m[1]))
      continue;
    int64_t index = 0;
    m[2].getAsInteger(10, index);
    std::string blockPath = (m[1] + "." + m[2]).str();
    std::string shape;
    llvm::raw_string_ostream os(shape);
    os << p.getTensorType();
    auto &member = families[m[1].str()][index];
    member.first.insert(p.getSymName().drop_front(blockPath.size()).str() +
                        ":" + shape);
    member.second.push_back(p);
  }
  const std::string *best = nullptr;
  size_t bestSize = 0;
  for (auto &[prefix, members] : families) {
    // Isomorphic blocks: every member has the first member's structure.
    const auto &first = members.begin()->second.first;
    bool same = llvm::all_of(
        members, [&](auto &kv) { return kv.second.first == first; });
    if (same && members.size() > bestSize && members.size() >= 2) {
      best = &prefix;
      bestSize = members.size();
    }
  }
  if (!best) {
    if (!pattern.empty())
      return module.emitError("--wrap=transformer:")
             << pattern << " matches no repeated block";
    return SmallVector<Group>();
  }
  SmallVector<Group> groups;
  for (auto &[index, member] : families[*best])
    groups.push_back({*best + "." + std::to_string(index), member.second});
  return groups;
}

/// size_based_auto_wrap_policy over the module tree, bottom-up.
SmallVector<Group> sizeGroups(ArrayRef<ParameterOp> params, int64_t minParams) {
  // Module paths, deepest first; each closes a unit once what it holds (its
  // own parameters and its children's unwrapped ones) reaches the minimum.
  std::set<std::string> modules;
  for (ParameterOp p : params) {
    std::string path = p.getModulePath().str();
    while (!path.empty()) {
      modules.insert(path);
      size_t dot = path.rfind('.');
      path = dot == std::string::npos ? "" : path.substr(0, dot);
    }
  }
  std::vector<std::string> order(modules.begin(), modules.end());
  llvm::sort(order, [](const std::string &a, const std::string &b) {
    size_t da = llvm::count(a, '.'), db = llvm::count(b, '.');
    return da != db ? da > db : a < b;
  });
  std::set<Operation *> taken;
  SmallVector<Group> groups;
  for (const std::string &module : order) {
    Group g{module, {}};
    int64_t total = 0;
    for (ParameterOp p : params)
      if (!taken.count(p) && within(p.getModulePath(), module)) {
        g.params.push_back(p);
        total += elements(p);
      }
    if (total >= minParams && !g.params.empty()) {
      for (ParameterOp p : g.params)
        taken.insert(p);
      groups.push_back(std::move(g));
    }
  }
  return groups;
}

SmallVector<Group> regexGroups(ArrayRef<ParameterOp> params,
                               ArrayRef<llvm::Regex> res) {
  llvm::MapVector<StringRef, Group> byModule;
  std::set<Operation *> taken;
  for (ParameterOp p : params) {
    // The outermost module on the parameter's path that matches.
    StringRef path = p.getModulePath();
    for (size_t end = 0; end <= path.size(); ++end) {
      if (end < path.size() && path[end] != '.')
        continue;
      StringRef module = path.take_front(end);
      if (llvm::any_of(
              res, [&](const llvm::Regex &re) { return re.match(module); })) {
        auto &g = byModule[module];
        g.name = module.str();
        g.params.push_back(p);
        break;
      }
    }
  }
  SmallVector<Group> groups;
  for (auto &kv : byModule)
    groups.push_back(std::move(kv.second));
  return groups;
}

struct FsdpWrapUnits : fsdp::impl::FsdpWrapUnitsBase<FsdpWrapUnits> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (!module.getOps<UnitOp>().empty()) {
      module.emitError("the module already has units");
      return signalPassFailure();
    }
    SmallVector<ParameterOp> params(module.getOps<ParameterOp>());
    StringRef policy = wrap, arg;
    std::tie(policy, arg) = StringRef(wrap).split(':');

    FailureOr<SmallVector<Group>> groups = SmallVector<Group>();
    if (policy == "transformer") {
      groups = transformerGroups(module, params, arg);
    } else if (policy == "size") {
      int64_t minParams = 0;
      if (arg.getAsInteger(10, minParams) || minParams <= 0) {
        module.emitError("--wrap=size needs a positive element count, got '")
            << arg << "'";
        return signalPassFailure();
      }
      groups = sizeGroups(params, minParams);
    } else if (policy == "regex") {
      SmallVector<llvm::Regex> res;
      SmallVector<StringRef> parts;
      arg.split(parts, ',', -1, /*KeepEmpty=*/false);
      for (StringRef part : parts) {
        res.emplace_back(("^(" + part + ")$").str());
        std::string error;
        if (!res.back().isValid(error)) {
          module.emitError("invalid --wrap=regex expression '")
              << part << "': " << error;
          return signalPassFailure();
        }
      }
      if (res.empty()) {
        module.emitError("--wrap=regex needs at least one expression");
        return signalPassFailure();
      }
      groups = regexGroups(params, res);
    } else if (policy != "none") {
      module.emitError("unknown --wrap policy '")
          << wrap << "' (transformer[:PATTERN], size:N, regex:R1,R2,..., none)";
      return signalPassFailure();
    }
    if (failed(groups))
      return signalPassFailure();

    std::set<Operation *> taken;
    for (Group &g : *groups)
      for (ParameterOp p : g.params)
        taken.insert(p);
    Group root{"root", {}};
    for (ParameterOp p : params)
      if (!taken.count(p))
        root.params.push_back(p);
    if (!root.params.empty())
      groups->push_back(std::move(root));

    OpBuilder b(module.getBodyRegion());
    b.setInsertionPointAfter(params.empty() ? &module.getBody()->front()
                                            : params.back().getOperation());
    for (Group &g : *groups) {
      SmallVector<Attribute> refs;
      int64_t total = 0;
      for (ParameterOp p : g.params) {
        refs.push_back(FlatSymbolRefAttr::get(p.getSymNameAttr()));
        total += elements(p);
      }
      bool isRoot = g.name == "root";
      UnitOp::create(b, module.getLoc(), b.getStringAttr(g.name),
                     b.getArrayAttr(refs), b.getBoolAttr(!isRoot),
                     /*reshard_to=*/IntegerAttr());
      // Reported at the unit's first parameter (no op dump attached).
      emitRemark(g.params.front().getLoc())
          << "unit '" << g.name << "': " << g.params.size() << " parameters, "
          << total << " elements (" << policy << " policy)";
    }
  }
};

} // namespace
