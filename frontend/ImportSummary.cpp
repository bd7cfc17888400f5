//===- ImportSummary.cpp - What an imported model holds -------------------===//
//
// A person's first look at a model: inputs, outputs, parameters with their
// module paths, the repeated blocks (`layers.N`, `h.N`, `encoder.layer.N`)
// that later become FSDP units, and how many ops of each kind were imported.
//
//===----------------------------------------------------------------------===//
#include "dialect/AttrNames.h"
#include "dialect/FsdpOps.h"
#include "frontend/OnnxImporter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Regex.h"

#include <map>

using namespace mlir;
using namespace mlir::fsdp;

static std::string typeString(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << t;
  return s;
}

void mlir::fsdp::printImportSummary(ModuleOp module, llvm::raw_ostream &os) {
  if (auto src = module->getAttrOfType<StringAttr>(mlir::fsdp::attrs::source))
    os << "model: " << src.getValue();
  if (auto opset = module->getAttrOfType<IntegerAttr>(mlir::fsdp::attrs::opset))
    os << " (opset " << opset.getInt() << ")";
  os << "\n";

  for (auto func : module.getOps<func::FuncOp>()) {
    for (unsigned i = 0; i < func.getNumArguments(); ++i) {
      auto name = func.getArgAttrOfType<StringAttr>(i, mlir::fsdp::attrs::name);
      os << "  input  " << (name ? name.getValue() : "?") << " : "
         << func.getArgument(i).getType() << "\n";
    }
    for (unsigned i = 0; i < func.getNumResults(); ++i) {
      auto name = func.getResultAttrOfType<StringAttr>(i, mlir::fsdp::attrs::name);
      os << "  output " << (name ? name.getValue() : "?") << " : "
         << func.getResultTypes()[i] << "\n";
    }
  }

  // Blocks: module paths of the form <prefix>.<index>[.rest].
  llvm::Regex block("^(.*[a-zA-Z_])\\.([0-9]+)(\\.|$)");
  std::map<std::string, std::map<std::string, int64_t>> blocks;
  int64_t totalElems = 0, totalBytes = 0, count = 0;
  os << "parameters:\n";
  for (auto p : module.getOps<ParameterOp>()) {
    RankedTensorType t = p.getTensorType();
    int64_t bytes = t.getNumElements() * ((t.getElementTypeBitWidth() + 7) / 8);
    totalElems += t.getNumElements();
    totalBytes += bytes;
    ++count;
    os << llvm::format(
        "  %-48s %-24s %s%s\n", p.getSymName().str().c_str(),
        typeString(t).c_str(),
        p.getModulePath().empty() ? "(root)" : p.getModulePath().str().c_str(),
        p.getSource() == "external" ? "  [external]" : "");
    SmallVector<StringRef> m;
    if (block.match(p.getModulePath(), &m)) {
      std::string id = (m[1] + "." + m[2]).str();
      blocks[m[1].str()][id] += t.getNumElements();
    }
  }
  os << "  " << count << " parameters, " << totalElems << " elements, "
     << llvm::format("%.2f", totalBytes / 1048576.0) << " MiB\n";
  for (auto &[prefix, members] : blocks)
    os << "blocks: " << members.size() << " x " << prefix << ".N ("
       << members.begin()->second << " elements each)\n";

  llvm::MapVector<StringRef, int> ops;
  module.walk([&](Operation *op) {
    if (isa<FsdpDialect>(op->getDialect()) && !isa<ParameterOp>(op))
      ++ops[op->getName().stripDialect()];
  });
  os << "ops:";
  for (auto &[name, n] : ops)
    os << " " << name << "=" << n;
  os << "\n";
}
