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
#include "passes/BlockNames.h"
#include "passes/Passes.h"

#include "dialect/FsdpOps.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Regex.h"

#include <algorithm>
#include <iterator>
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

/// A family of repeated blocks: `<prefix><sep><index>` module paths
/// (`h.0`, `layers.11`, `layer_3`, `encoder.layers.encoder_layer_5`).
struct Family {
  std::string prefix;
  char sep = '.';
  /// index -> each member's structure (names relative to the block, with
  /// shapes) and parameters.
  std::map<int64_t, std::pair<std::set<std::string>, SmallVector<ParameterOp>>>
      members;
  /// After isomorphism: the parameters some member holds besides what
  /// every member computes with (a buffer the exporter merged into block
  /// 0), which belong to no block.
  SmallVector<ParameterOp> extras;
  int64_t depth() const { return llvm::count(prefix, '.'); }
  std::string block(int64_t index) const {
    return prefix + sep + std::to_string(index);
  }
};

/// A parameter's place in its block's structure: its name relative to the
/// block (`block` its path) and its type.
std::string structureKey(ParameterOp p, StringRef block) {
  std::string key = p.getSymName().drop_front(block.size()).str() + ":";
  llvm::raw_string_ostream os(key);
  os << p.getTensorType();
  return key;
}

/// Whether the family's blocks compute the same thing: every member holds
/// the structure all members share, and at most one holds more than it
/// (an initializer shared by all blocks, e.g. a causal mask registered in
/// each and merged into one by torch.onnx.export, is named for the first
/// block that reads it): those parameters leave the block.
bool isomorphic(Family &f) {
  if (f.members.size() < 2)
    return false;
  std::set<std::string> common = f.members.begin()->second.first;
  for (auto &[index, m] : f.members) {
    std::set<std::string> both;
    std::set_intersection(common.begin(), common.end(), m.first.begin(),
                          m.first.end(), std::inserter(both, both.begin()));
    common = std::move(both);
  }
  if (common.empty())
    return false;
  size_t exact = 0;
  for (auto &[index, m] : f.members)
    exact += m.first.size() == common.size();
  if (exact + 1 < f.members.size())
    return false;
  for (auto &[index, m] : f.members) {
    if (m.first.size() == common.size())
      continue;
    std::string blockPath = f.block(index);
    SmallVector<ParameterOp> kept;
    for (ParameterOp p : m.second)
      (common.count(structureKey(p, blockPath)) ? kept : f.extras)
          .push_back(p);
    m.second = std::move(kept);
  }
  return true;
}

/// transformer: one unit per block of each family of isomorphic repeated
/// blocks, the family with the most blocks first (the shallowest of equal
/// ones); a family whose parameters an earlier one took is skipped (the
/// `mlp.0`, `mlp.2` inside a block). With a pattern, only families whose
/// prefix matches it.
FailureOr<SmallVector<Group>> transformerGroups(ModuleOp module,
                                                ArrayRef<ParameterOp> params,
                                                StringRef pattern) {
  std::optional<llvm::Regex> explicitPrefix;
  if (!pattern.empty()) {
    explicitPrefix.emplace(("^(" + pattern + ")$").str());
    std::string error;
    if (!explicitPrefix->isValid(error))
      return module.emitError("invalid --wrap=transformer pattern '")
             << pattern << "': " << error;
  }
  // Every component of a parameter's module path that ends in an index
  // after '.' or '_' opens a candidate family (not only the deepest: in
  // `encoder.layers.encoder_layer_0.mlp.0` both `...encoder_layer` and
  // `...encoder_layer_0.mlp` are candidates).
  std::map<std::pair<std::string, char>, Family> families;
  for (ParameterOp p : params) {
    StringRef path = p.getModulePath();
    for (size_t end = 1; end <= path.size(); ++end) {
      if (end < path.size() && path[end] != '.')
        continue;
      StringRef head = path.take_front(end), prefix;
      char sep = 0;
      int64_t index = 0;
      if (!splitBlockName(head, prefix, sep, index))
        continue;
      Family &f = families[{prefix.str(), sep}];
      f.prefix = prefix.str();
      f.sep = sep;
      auto &member = f.members[index];
      member.first.insert(structureKey(p, head));
      member.second.push_back(p);
    }
  }
  SmallVector<Family *> candidates, found;
  for (auto &[key, f] : families) {
    if (!isomorphic(f))
      continue;
    found.push_back(&f);
    if (!explicitPrefix || explicitPrefix->match(f.prefix))
      candidates.push_back(&f);
  }
  llvm::stable_sort(candidates, [](Family *a, Family *b) {
    return a->members.size() != b->members.size()
               ? a->members.size() > b->members.size()
               : a->depth() < b->depth();
  });
  std::set<Operation *> taken;
  SmallVector<Group> groups;
  for (Family *f : candidates) {
    bool free = llvm::all_of(f->members, [&](auto &kv) {
      return llvm::none_of(kv.second.second, [&](ParameterOp p) {
        return taken.count(p.getOperation());
      });
    });
    if (!free)
      continue;
    for (auto &[index, member] : f->members) {
      for (ParameterOp p : member.second)
        taken.insert(p);
      groups.push_back({f->block(index), member.second});
    }
    for (ParameterOp p : f->extras)
      emitRemark(p.getLoc())
          << "'" << p.getSymName() << "' is in no unit of '" << f->prefix
          << "': the other blocks have no such parameter (a buffer shared by "
             "every block and merged into one by the exporter); it joins the "
             "root unit";
  }
  if (groups.empty() && !pattern.empty()) {
    // One line naming what there is to choose from.
    std::string names;
    llvm::stable_sort(found, [](Family *a, Family *b) {
      return a->members.size() > b->members.size();
    });
    for (Family *f : found)
      names += (names.empty() ? "" : ", ") + f->prefix + " (" +
               std::to_string(f->members.size()) + " blocks)";
    return module.emitError("--wrap=transformer:")
           << pattern << " matches no repeated block; "
           << (names.empty() ? "the model has none"
                             : "repeated blocks found: " + names);
  }
  return groups;
}

/// Groups named by their module, in the order modules are first seen.
struct ModuleGroups {
  llvm::MapVector<StringRef, Group> byModule;
  void add(StringRef module, ParameterOp p) {
    Group &g = byModule[module];
    g.name = module.str();
    g.params.push_back(p);
  }
  SmallVector<Group> take() {
    SmallVector<Group> groups;
    for (auto &kv : byModule)
      groups.push_back(std::move(kv.second));
    return groups;
  }
};

/// The default policy's fallback: units of at least 1/kFallbackUnits of
/// the model when no family of repeated blocks holds most of it, for a
/// model of at least kFallbackMinElements (a smaller one, 4 MiB of f32,
/// gains nothing from being sharded finer than one unit).
constexpr int64_t kFallbackUnits = 8;
constexpr int64_t kFallbackMinElements = 1 << 20;

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
  ModuleGroups byModule;
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
        byModule.add(module, p);
        break;
      }
    }
  }
  return byModule.take();
}

/// The class of the module `depth` components down a parameter's path (0:
/// the root), or "" when the parameter carries no classes.
StringRef classAt(ParameterOp p, size_t depth) {
  std::optional<ArrayAttr> classes = p.getModuleClasses();
  if (!classes || depth >= classes->size())
    return "";
  return cast<StringAttr>((*classes)[depth]).getValue();
}

/// `path`'s first `depth` components.
StringRef prefixOf(StringRef path, size_t depth) {
  if (depth == 0)
    return "";
  size_t end = 0;
  for (size_t i = 0; i < depth; ++i) {
    end = path.find('.', end + (i ? 1 : 0));
    if (end == StringRef::npos)
      return path;
  }
  return path.take_front(end);
}

/// class:NAMES: a unit per module of one of the classes, each holding the
/// parameters below it that no module of those classes nested in it holds
/// (PyTorch's transformer_auto_wrap_policy). The root module is never one
/// (its parameters form the root unit as always).
SmallVector<Group> classGroups(ArrayRef<ParameterOp> params,
                               const std::set<std::string> &classes) {
  ModuleGroups byModule;
  for (ParameterOp p : params) {
    std::optional<ArrayAttr> chain = p.getModuleClasses();
    if (!chain)
      continue;
    for (size_t depth = chain->size() - 1; depth >= 1; --depth) {
      if (!classes.count(classAt(p, depth).str()))
        continue;
      byModule.add(prefixOf(p.getModulePath(), depth), p);
      break;
    }
  }
  return byModule.take();
}

/// The classes of the modules holding parameters (what --wrap=class: can
/// name), most instances first.
std::string classesHeld(ArrayRef<ParameterOp> params) {
  std::map<std::string, std::set<std::string>> instances;
  for (ParameterOp p : params)
    if (std::optional<ArrayAttr> chain = p.getModuleClasses())
      for (size_t depth = 1; depth < chain->size(); ++depth)
        instances[classAt(p, depth).str()].insert(
            prefixOf(p.getModulePath(), depth).str());
  std::vector<std::pair<size_t, std::string>> order;
  for (auto &[name, modules] : instances)
    order.push_back({modules.size(), name});
  llvm::stable_sort(order, [](auto &a, auto &b) { return a.first > b.first; });
  std::string out;
  for (auto &[count, name] : order)
    out += (out.empty() ? "" : ", ") + name + " (" + std::to_string(count) +
           ")";
  return out;
}

/// The class of repeated blocks when no numbered family exists (`block_a`,
/// `block_b`): among classes with two or more instances of one structure
/// (relative names and shapes), the one whose instances hold the most
/// elements together (a block over the layers inside it). "" if none.
std::string repeatedClass(ArrayRef<ParameterOp> params) {
  struct Instances {
    std::map<std::string, std::set<std::string>> structure; // module -> keys
    int64_t elements = 0;
  };
  std::map<std::string, Instances> byClass;
  for (ParameterOp p : params) {
    std::optional<ArrayAttr> chain = p.getModuleClasses();
    if (!chain)
      return "";
    for (size_t depth = 1; depth < chain->size(); ++depth) {
      Instances &c = byClass[classAt(p, depth).str()];
      StringRef module = prefixOf(p.getModulePath(), depth);
      c.structure[module.str()].insert(structureKey(p, module));
      c.elements += elements(p);
    }
  }
  std::string best;
  int64_t bestElements = 0;
  for (auto &[name, c] : byClass) {
    if (c.structure.size() < 2)
      continue;
    const auto &first = c.structure.begin()->second;
    if (!llvm::all_of(c.structure,
                      [&](auto &kv) { return kv.second == first; }))
      continue;
    if (c.elements > bestElements) {
      best = name;
      bestElements = c.elements;
    }
  }
  return best;
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
    std::string shownPolicy = policy.str();
    bool classesKnown =
        !params.empty() && llvm::all_of(params, [](ParameterOp p) {
          return p.getModuleClasses().has_value();
        });
    // A Hugging Face model names the modules a device map must not split,
    // which Accelerate's TRANSFORMER_BASED_WRAP wraps (the decoder layers,
    // and for BERT-like models the embeddings): the tracer records them
    // (fsdp.no_split_modules) and the default policy takes them as given.
    auto noSplit =
        module->getAttrOfType<ArrayAttr>("fsdp.no_split_modules");
    if (policy == "transformer" && arg.empty() && classesKnown && noSplit &&
        !noSplit.empty()) {
      std::set<std::string> classes;
      for (Attribute a : noSplit)
        if (auto name = dyn_cast<StringAttr>(a))
          classes.insert(name.str());
      groups = classGroups(params, classes);
      emitRemark(module.getLoc())
          << "transformer policy: a unit per module of class "
          << llvm::join(classes, ", ")
          << " (the model's _no_split_modules, as Accelerate's "
             "TRANSFORMER_BASED_WRAP)";
    } else if (policy == "transformer") {
      groups = transformerGroups(module, params, arg);
      if (succeeded(groups) && classesKnown && !groups->empty()) {
        // The classes of the blocks found, then every module of them.
        std::set<std::string> classes;
        for (Group &g : *groups)
          classes.insert(
              classAt(g.params.front(), 1 + llvm::count(g.name, '.')).str());
        groups = classGroups(params, classes);
        emitRemark(module.getLoc())
            << "transformer policy: a unit per module of class "
            << llvm::join(classes, ", ");
      } else if (succeeded(groups) && classesKnown && arg.empty()) {
        std::string repeated = repeatedClass(params);
        if (!repeated.empty()) {
          groups = classGroups(params, {repeated});
          emitRemark(module.getLoc())
              << "transformer policy: no numbered blocks; a unit per module "
                 "of class "
              << repeated << ", the repeated block holding the most elements";
        }
      }
      // No family of identical blocks covers most of the model (a CNN's
      // stages differ): one root unit would gather the whole model on
      // every rank, so the default falls back to size_based_auto_wrap_policy
      // with a minimum of 1/kFallbackUnits of the model (past
      // kFallbackMinElements).
      if (succeeded(groups) && arg.empty()) {
        int64_t total = 0, covered = 0;
        for (ParameterOp p : params)
          total += elements(p);
        for (Group &g : *groups)
          for (ParameterOp p : g.params)
            covered += elements(p);
        if (total >= kFallbackMinElements && 2 * covered < total) {
          int64_t minParams = std::max<int64_t>(
              1, (total + kFallbackUnits - 1) / kFallbackUnits);
          groups = sizeGroups(params, minParams);
          shownPolicy = "size fallback";
          emitRemark(module.getLoc())
              << "transformer policy: repeated blocks hold "
              << (100 * covered / total) << "% of the " << total
              << " elements; falling back to the size policy (a unit per "
                 "module of at least "
              << minParams << " elements, as size_based_auto_wrap_policy; "
              << "--wrap=transformer:PATTERN or --wrap=none to choose)";
        }
      }
    } else if (policy == "class") {
      SmallVector<StringRef> parts;
      arg.split(parts, ',', -1, /*KeepEmpty=*/false);
      std::set<std::string> classes;
      for (StringRef part : parts)
        classes.insert(part.trim().str());
      if (classes.empty()) {
        module.emitError("--wrap=class needs at least one class name");
        return signalPassFailure();
      }
      if (!classesKnown) {
        module.emitError("--wrap=class:")
            << arg
            << " needs the module classes a traced model carries "
               "(python3 -m fsdp_trace); this model's parameters have none "
               "(ONNX keeps no classes): use --wrap=transformer or "
               "--wrap=regex:";
        return signalPassFailure();
      }
      groups = classGroups(params, classes);
      if (groups->empty()) {
        module.emitError("--wrap=class:")
            << arg << " names no class of a module holding parameters; "
            << "the model's are: " << classesHeld(params);
        return signalPassFailure();
      }
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
          << wrap
          << "' (transformer[:PATTERN], class:NAME,..., size:N, "
             "regex:R1,R2,..., none)";
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
          << total << " elements (" << shownPolicy << " policy)";
    }
  }
};

} // namespace
