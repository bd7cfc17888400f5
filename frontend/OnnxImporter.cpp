//===- OnnxImporter.cpp - ONNX model → fsdp dialect -----------------------===//
//
// Parse and validate (OnnxModel.cpp), then walk the nodes in topological
// order. Each node either folds (all inputs known at import time: shape
// subgraphs, masks) or becomes fsdp ops whose result types come from the
// dialect's shape functions. Float initializers become fsdp.parameter
// symbols; their bytes are never read, only their location checked.
//
//===----------------------------------------------------------------------===//
#include "dialect/AttrNames.h"
#include "frontend/OnnxImporter.h"
#include "frontend/NodeContext.h"
#include "frontend/OnnxModel.h"

#include "dialect/FsdpOps.h"
#include "passes/BlockNames.h"
#include "passes/Passes.h"
#include "runtime/support/File.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <onnx/onnx_pb.h>

#include <map>
#include <set>

using namespace mlir;
using namespace mlir::fsdp;

//===----------------------------------------------------------------------===//
// The importer
//===----------------------------------------------------------------------===//

namespace mlir::fsdp {
class Importer {
public:
  Importer(MLIRContext *ctx, StringRef displayName, StringRef baseDir,
           const ImportOptions &options)
      : ctx(ctx), displayName(displayName.str()), baseDir(baseDir.str()),
        options(options), builder(ctx),
        fileLoc(FileLineColLoc::get(ctx, displayName, 0, 0)) {}

  OwningOpRef<ModuleOp> run(StringRef bytes);

  ImportedValue &value(const std::string &name) { return values[name]; }
  Value materialize(ImportedValue &v, Location loc);
  const OnnxGraph &graph() const { return g; }

private:
  LogicalResult checkSupported();
  LogicalResult importInitializers();
  LogicalResult importInputs(SmallVectorImpl<Type> &argTypes,
                             SmallVectorImpl<std::string> &argNames);
  LogicalResult importParameter(const onnx::TensorProto &t);
  LogicalResult checkExternalData(const onnx::TensorProto &t, int64_t bytes,
                                  int64_t &offset, int64_t &length,
                                  std::string &location);
  std::string modulePathOf(const std::string &name);
  void warnSharedAcrossBlocks();
  void warnFoldedBatchNorm();

  MLIRContext *ctx;
  std::string displayName, baseDir;
  ImportOptions options;
  OpBuilder builder;
  Location fileLoc;
  OnnxGraph g;
  OwningOpRef<ModuleOp> module;
  llvm::StringMap<ImportedValue> values;
  llvm::StringMap<Value> parameterReads;
};
} // namespace mlir::fsdp

Value Importer::materialize(ImportedValue &v, Location loc) {
  if (v.value)
    return v.value;
  if (!v.parameter.empty()) {
    // One read per parameter, shared by aliases (Identity, tied weights).
    Value &read = parameterReads[v.parameter];
    if (!read)
      read = GetParameterOp::create(builder, loc, v.type,
                                    FlatSymbolRefAttr::get(ctx, v.parameter));
    v.value = read;
  } else if (v.constant)
    v.value = ConstantOp::create(builder, loc, v.constant->toAttr());
  return v.value;
}

std::vector<StringRef> mlir::fsdp::onnxSupportedOps() {
  std::vector<StringRef> names;
  for (const auto &entry : onnxLowerings())
    names.push_back(entry.getKey());
  return names;
}

LogicalResult Importer::checkSupported() {
  const auto &table = onnxLowerings();
  std::vector<std::string> unsupported;
  for (int i = 0; i < g.graph->node_size(); ++i)
    if (!table.count(g.graph->node(i).op_type()))
      unsupported.push_back(describeNode(g.graph->node(i), i));
  if (unsupported.empty())
    return success();
  return emitError(fileLoc)
         << unsupported.size()
         << " unsupported op(s): " << llvm::join(unsupported, ", ");
}

std::string Importer::modulePathOf(const std::string &name) {
  // Parameter names from PyTorch are state_dict keys: the module path is
  // everything before the last component.
  if (!StringRef(name).starts_with("onnx::")) {
    size_t dot = name.rfind('.');
    return dot == std::string::npos ? "" : name.substr(0, dot);
  }
  // Otherwise take the scope of the first node reading it:
  // "/layers.0/self_attn/q_proj/MatMul" -> "layers.0.self_attn.q_proj".
  for (const auto &node : g.graph->node()) {
    if (!llvm::is_contained(node.input(), name))
      continue;
    SmallVector<StringRef> parts;
    StringRef(node.name()).split(parts, '/', -1, /*KeepEmpty=*/false);
    if (parts.size() < 2)
      return "";
    parts.pop_back();
    return llvm::join(parts, ".");
  }
  return "";
}

/// torch.onnx.export in eval mode merges initializers of equal value into
/// one, named for its first reader. The layers of a fresh
/// nn.TransformerEncoder (deep copies of one layer) then share every weight
/// in the file and would train as one tied layer, where PyTorch trains them
/// apart. Warns, once per family of blocks (`layers.N`, `encoder_layer_N`,
/// from the node names' scopes), when float initializers are read from
/// several of its blocks. (A buffer every block registers, nanoGPT's
/// causal mask, is shared the same way, harmlessly: it is never trained.)
void Importer::warnSharedAcrossBlocks() {
  llvm::StringSet<> floats;
  for (const auto &t : g.graph->initializer())
    if (isa_and_nonnull<FloatType>(onnxElementType(ctx, t.data_type())))
      floats.insert(t.name());
  // The exporter reads a merged initializer through Identity nodes (named
  // `Identity_N`, no scope): their outputs stand for it.
  llvm::StringMap<std::string> alias;
  for (int idx : g.order) {
    const auto &node = g.graph->node(idx);
    if (node.op_type() != "Identity" || node.input_size() != 1 ||
        node.output_size() != 1)
      continue;
    const std::string &in = node.input(0);
    if (floats.contains(in))
      alias[node.output(0)] = in;
    else if (auto a = alias.find(in); a != alias.end())
      alias[node.output(0)] = a->second;
  }
  // family -> initializer -> block indices reading it
  std::map<std::string, std::map<std::string, std::set<int64_t>>> reads;
  for (const auto &node : g.graph->node()) {
    SmallVector<StringRef> parts;
    StringRef(node.name()).split(parts, '/', -1, /*KeepEmpty=*/false);
    if (parts.size() < 2)
      continue;
    parts.pop_back();
    // The outermost indexed scope: `layers.1`, `encoder_layer_0`.
    std::string family;
    int64_t index = -1;
    for (size_t k = 0; k < parts.size() && index < 0; ++k) {
      StringRef prefix;
      char sep = 0;
      if (!splitBlockName(parts[k], prefix, sep, index)) {
        index = -1;
        continue;
      }
      SmallVector<StringRef> head(parts.begin(), parts.begin() + k);
      head.push_back(prefix);
      family = llvm::join(head, ".");
    }
    if (index < 0)
      continue;
    for (const std::string &in : node.input()) {
      if (floats.contains(in))
        reads[family][in].insert(index);
      else if (auto a = alias.find(in); a != alias.end())
        reads[family][a->second].insert(index);
    }
  }
  for (const auto &[family, byName] : reads) {
    int64_t shared = 0;
    const std::string *example = nullptr;
    const std::set<int64_t> *blocks = nullptr;
    for (const auto &[name, indices] : byName)
      if (indices.size() > 1) {
        ++shared;
        if (!example) {
          example = &name;
          blocks = &indices;
        }
      }
    if (!shared)
      continue;
    std::string which;
    for (int64_t i : *blocks)
      which += (which.empty() ? "" : ", ") + std::to_string(i);
    emitWarning(fileLoc)
        << shared << " initializer(s) are each read by several blocks of '"
        << family << "' (e.g. '" << *example << "' by blocks " << which
        << "): they are one tensor here and train as one. torch.onnx.export "
           "merges initializers of equal value in eval mode (a freshly built "
           "nn.TransformerEncoder's layers are copies); if these are separate "
           "parameters in PyTorch, export with "
           "training=torch.onnx.TrainingMode.TRAINING or after training has "
           "made them differ";
  }
}

/// torch.onnx.export in eval mode folds each BatchNorm into the Conv
/// before it (even with do_constant_folding=False): the weights and biases
/// of the folded convolutions are new initializers named `onnx::Conv_N`.
/// The graph then has no batch normalisation: it trains another model than
/// the PyTorch module, under names its state_dict does not have. Warns,
/// once, naming the first.
void Importer::warnFoldedBatchNorm() {
  llvm::StringSet<> initializers;
  for (const auto &t : g.graph->initializer())
    initializers.insert(t.name());
  int64_t folded = 0;
  const std::string *example = nullptr;
  for (const auto &node : g.graph->node()) {
    if (node.op_type() != "Conv" || node.input_size() < 2)
      continue;
    const std::string &w = node.input(1);
    if (StringRef(w).starts_with("onnx::Conv_") && initializers.contains(w)) {
      ++folded;
      example = example ? example : &w;
    }
  }
  if (folded)
    emitWarning(fileLoc)
        << folded << " Conv weight(s) have names the exporter made (e.g. '"
        << *example << "'): torch.onnx.export folds each BatchNorm into the "
        << "Conv before it when exporting in eval mode, so this graph has no "
           "batch normalisation and trains another model than the PyTorch "
           "module, under names its state_dict does not have. To train batch "
           "normalisation as model.train() does, export with "
           "training=torch.onnx.TrainingMode.TRAINING";
}

LogicalResult Importer::checkExternalData(const onnx::TensorProto &t,
                                          int64_t bytes, int64_t &offset,
                                          int64_t &length,
                                          std::string &location) {
  std::string what = "initializer '" + t.name() + "'";
  offset = 0;
  length = -1;
  for (const auto &kv : t.external_data()) {
    auto parse = [&](int64_t &out) -> LogicalResult {
      if (StringRef(kv.value()).getAsInteger(10, out) || out < 0)
        return emitError(fileLoc)
               << what << ": external data " << kv.key() << " '" << kv.value()
               << "' is not a non-negative integer";
      return success();
    };
    if (kv.key() == "location")
      location = kv.value();
    else if (kv.key() == "offset" && failed(parse(offset)))
      return failure();
    else if (kv.key() == "length" && failed(parse(length)))
      return failure();
  }
  if (location.empty())
    return emitError(fileLoc) << what << ": external data has no location";
  namespace path = llvm::sys::path;
  if (path::is_absolute(location) || StringRef(location).starts_with("/") ||
      llvm::is_contained(
          llvm::make_range(path::begin(location), path::end(location)), ".."))
    return emitError(fileLoc)
           << what << ": external data location '" << location
           << "' must be a relative path without '..'";
  if (length < 0)
    length = bytes;
  if (length != bytes)
    return emitError(fileLoc)
           << what << ": external data length " << length
           << " does not match the tensor's " << bytes << " bytes";
  if (baseDir.empty())
    return emitError(fileLoc) << what
                              << ": external data cannot be resolved for a "
                                 "model read from memory";
  // The check fsdp-run makes before it reads the data (one function, on
  // the opened descriptor): inside the model's directory, no component a
  // symlink, a regular file with one link.
  ::fsdp::InputFile file;
  if (::fsdp::Status s =
          file.openInside(baseDir, location, what + ": external data");
      !s)
    return emitError(fileLoc) << s.message();
  uint64_t size = (uint64_t)file.size();
  if ((uint64_t)offset > size || (uint64_t)length > size - offset)
    return emitError(fileLoc)
           << what << ": external data [" << offset << ", " << offset + length
           << ") lies outside '" << file.name() << "' (" << size << " bytes)";
  return success();
}

LogicalResult Importer::importParameter(const onnx::TensorProto &t) {
  std::string what = "initializer '" + t.name() + "'";
  Type et = onnxElementType(ctx, t.data_type());
  auto dims = checkedDims(
      SmallVector<int64_t>(t.dims().begin(), t.dims().end()), fileLoc, what);
  if (failed(dims))
    return failure();
  auto type = RankedTensorType::get(*dims, et);
  int64_t bytes = type.getNumElements() * byteWidth(et);
  auto param = ParameterOp::create(
      builder, NameLoc::get(builder.getStringAttr(t.name()), fileLoc),
      builder.getStringAttr(t.name()), TypeAttr::get(type),
      builder.getStringAttr(modulePathOf(t.name())),
      builder.getStringAttr("initializer"), StringAttr(), IntegerAttr(),
      IntegerAttr(), /*buffer=*/UnitAttr(), /*module_classes=*/ArrayAttr(),
      /*frozen=*/UnitAttr());
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    int64_t offset, length;
    std::string location;
    if (failed(checkExternalData(t, bytes, offset, length, location)))
      return failure();
    param.setSource("external");
    param.setLocation(location);
    param.setOffset(offset);
    param.setLength(length);
  } else if (t.has_raw_data()) {
    if ((int64_t)t.raw_data().size() != bytes)
      return emitError(fileLoc)
             << what << ": raw_data holds " << t.raw_data().size()
             << " bytes, expected " << bytes << " for " << type;
  } else if (typedCount(t) != type.getNumElements()) {
    return emitError(fileLoc)
           << what << ": holds " << typedCount(t) << " values, expected "
           << type.getNumElements() << " for " << type;
  }
  ImportedValue &v = values[t.name()];
  v.type = type;
  v.parameter = t.name();
  return success();
}

LogicalResult Importer::importInitializers() {
  for (const auto &t : g.graph->initializer()) {
    Type et = onnxElementType(ctx, t.data_type());
    if (!et)
      return emitError(fileLoc) << "initializer '" << t.name()
                                << "': unsupported data type " << t.data_type();
    if (isa<FloatType>(et)) {
      if (failed(importParameter(t)))
        return failure();
      continue;
    }
    // Integer and boolean initializers are buffers (indices, masks): small,
    // read now so they can take part in folding.
    auto h = readTensorProto(t, ctx, fileLoc, "initializer '" + t.name() + "'");
    if (failed(h))
      return failure();
    ImportedValue &v = values[t.name()];
    v.type = h->type();
    v.constant = std::make_shared<const HostTensor>(std::move(*h));
  }
  return success();
}

LogicalResult Importer::importInputs(SmallVectorImpl<Type> &argTypes,
                                     SmallVectorImpl<std::string> &argNames) {
  for (const auto &in : g.graph->input()) {
    if (values.count(in.name()))
      continue; // an initializer listed as input (IR < 4 style)
    std::string what = "graph input '" + in.name() + "'";
    if (!in.type().has_tensor_type())
      return emitError(fileLoc) << what << " is not a tensor";
    const auto &tt = in.type().tensor_type();
    Type et = onnxElementType(ctx, tt.elem_type());
    if (!et)
      return emitError(fileLoc)
             << what << ": unsupported element type " << tt.elem_type();
    if (!tt.has_shape())
      return emitError(fileLoc) << what << " has no shape";
    SmallVector<int64_t> dims;
    for (int d = 0; d < tt.shape().dim_size(); ++d) {
      const auto &dim = tt.shape().dim(d);
      if (d == 0 && options.batchSize) {
        dims.push_back(*options.batchSize);
        continue;
      }
      if (!dim.has_dim_value() || dim.dim_value() < 0) {
        std::string sym = dim.has_dim_param() ? " ('" + dim.dim_param() + "')"
                                              : std::string();
        auto diag = emitError(fileLoc)
                    << what << ": dimension " << d << sym << " is not static";
        if (d == 0)
          diag << "; fix it with --batch-size";
        return diag;
      }
      dims.push_back(dim.dim_value());
    }
    if (failed(checkedDims(dims, fileLoc, what)))
      return failure();
    auto type = RankedTensorType::get(dims, et);
    argTypes.push_back(type);
    argNames.push_back(in.name());
    values[in.name()].type = type;
  }
  return success();
}

OwningOpRef<ModuleOp> Importer::run(StringRef bytes) {
  auto parsed = parseOnnxModel(bytes, fileLoc);
  if (failed(parsed))
    return nullptr;
  g = std::move(*parsed);
  if (options.batchSize && *options.batchSize <= 0) {
    emitError(fileLoc) << "--batch-size must be positive, got "
                       << *options.batchSize;
    return nullptr;
  }
  if (failed(checkSupported()))
    return nullptr;
  warnSharedAcrossBlocks();
  warnFoldedBatchNorm();

  module = ModuleOp::create(fileLoc);
  builder.setInsertionPointToEnd(module->getBody());
  if (failed(importInitializers()))
    return nullptr;
  SmallVector<Type> argTypes;
  SmallVector<std::string> argNames;
  if (failed(importInputs(argTypes, argNames)))
    return nullptr;

  auto func = func::FuncOp::create(builder, fileLoc, "forward",
                                   builder.getFunctionType(argTypes, {}));
  Block *body = func.addEntryBlock();
  for (auto [i, name] : llvm::enumerate(argNames)) {
    values[name].value = body->getArgument(i);
    func.setArgAttr(i, mlir::fsdp::attrs::name, builder.getStringAttr(name));
  }
  builder.setInsertionPointToEnd(body);

  const auto &table = onnxLowerings();
  for (int idx : g.order) {
    const onnx::NodeProto &node = g.graph->node(idx);
    Location loc =
        NameLoc::get(builder.getStringAttr(describeNode(node, idx)), fileLoc);
    NodeContext nc(*this, node, idx, g.opset, builder, loc);
    if (failed(table.lookup(node.op_type())(nc)))
      return nullptr;
    // Every named output a lowering did not define would be read as nothing.
    for (int i = 0; i < node.output_size(); ++i) {
      if (node.output(i).empty() || values[node.output(i)].type ||
          !g.uses.lookup(node.output(i)))
        continue;
      emitError(loc) << "output " << i << " ('" << node.output(i)
                     << "') is read but this op does not produce it";
      return nullptr;
    }
  }

  SmallVector<Value> results;
  SmallVector<Type> resultTypes;
  for (const auto &out : g.graph->output()) {
    ImportedValue &v = values[out.name()];
    const auto &tt = out.type().tensor_type();
    Type declared = onnxElementType(ctx, tt.elem_type());
    if (out.type().has_tensor_type() && tt.elem_type() != 0 &&
        declared != v.type.getElementType()) {
      emitError(fileLoc) << "graph output '" << out.name()
                         << "' is declared with element type " << declared
                         << " but computes " << v.type;
      return nullptr;
    }
    results.push_back(materialize(v, fileLoc));
    resultTypes.push_back(v.type);
  }
  func::ReturnOp::create(builder, fileLoc, results);
  func.setFunctionType(builder.getFunctionType(argTypes, resultTypes));
  for (auto [i, out] : llvm::enumerate(g.graph->output()))
    func.setResultAttr(i, mlir::fsdp::attrs::name, builder.getStringAttr(out.name()));

  ModuleOp m = *module;
  m->setAttr(mlir::fsdp::attrs::source, builder.getStringAttr(displayName));
  m->setAttr(mlir::fsdp::attrs::opset, builder.getI64IntegerAttr(g.opset));
  if (options.batchSize)
    m->setAttr(mlir::fsdp::attrs::batchSize,
               builder.getI64IntegerAttr(*options.batchSize));
  if (failed(demoteFloat64(m)) || failed(verify(m)))
    return nullptr;

  PassManager pm(ctx);
  addFrontendPasses(pm, options.fusions);
  if (failed(pm.run(m)))
    return nullptr;
  return std::move(module);
}

OwningOpRef<ModuleOp>
mlir::fsdp::importOnnxBytes(MLIRContext *ctx, StringRef bytes,
                            StringRef displayName, StringRef baseDir,
                            const ImportOptions &options) {
  ctx->loadDialect<FsdpDialect, func::FuncDialect>();
  Importer importer(ctx, displayName, baseDir, options);
  return importer.run(bytes);
}

OwningOpRef<ModuleOp> mlir::fsdp::importOnnxFile(MLIRContext *ctx,
                                                 StringRef path,
                                                 const ImportOptions &options) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer) {
    emitError(FileLineColLoc::get(ctx, path, 0, 0))
        << "cannot read '" << path << "': " << buffer.getError().message();
    return nullptr;
  }
  SmallString<256> dir(path);
  llvm::sys::path::remove_filename(dir);
  if (dir.empty())
    dir = ".";
  return importOnnxBytes(ctx, (*buffer)->getBuffer(), path, dir, options);
}

//===----------------------------------------------------------------------===//
// NodeContext
//===----------------------------------------------------------------------===//

InFlightDiagnostic NodeContext::error() const { return emitError(loc); }
int NodeContext::numInputs() const { return node.input_size(); }
int NodeContext::numOutputs() const { return node.output_size(); }
bool NodeContext::hasInput(int i) const {
  return i < node.input_size() && !node.input(i).empty();
}
ImportedValue &NodeContext::input(int i) const {
  return importer.value(node.input(i));
}
const HostTensor *NodeContext::constInput(int i) const {
  ImportedValue &v = input(i);
  return v.constant.get();
}
FailureOr<const HostTensor *> NodeContext::requireConst(int i,
                                                        StringRef what) const {
  if (!hasInput(i))
    return error() << "missing input " << what;
  if (const HostTensor *t = constInput(i))
    return t;
  return error() << "input " << what << " ('" << node.input(i)
                 << "') must be known at import time (a constant or a "
                    "foldable shape computation)";
}
bool NodeContext::allConst() const {
  for (int i = 0; i < numInputs(); ++i)
    if (hasInput(i) && !constInput(i))
      return false;
  return true;
}
Value NodeContext::operand(int i) const {
  if (!hasInput(i))
    return Value();
  return importer.materialize(input(i), loc);
}
Value NodeContext::materialize(ImportedValue &v) const {
  return importer.materialize(v, loc);
}
bool NodeContext::outputUsed(int i) const {
  return i < node.output_size() && !node.output(i).empty() &&
         importer.graph().uses.lookup(node.output(i)) > 0;
}

SmallVector<std::string> NodeContext::outputReaders(int i) const {
  SmallVector<std::string> readers;
  if (i >= node.output_size() || node.output(i).empty())
    return readers;
  const std::string &name = node.output(i);
  const onnx::GraphProto &g = *importer.graph().graph;
  for (const auto &other : g.node())
    if (llvm::is_contained(other.input(), name))
      readers.push_back(other.op_type());
  for (const auto &out : g.output())
    if (out.name() == name)
      readers.push_back("");
  return readers;
}

const onnx::AttributeProto *NodeContext::attr(StringRef name) const {
  for (const auto &a : node.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}
int64_t NodeContext::attrInt(StringRef name, int64_t dflt) const {
  const auto *a = attr(name);
  return a ? a->i() : dflt;
}
float NodeContext::attrFloat(StringRef name, float dflt) const {
  const auto *a = attr(name);
  return a ? a->f() : dflt;
}
std::string NodeContext::attrString(StringRef name, StringRef dflt) const {
  const auto *a = attr(name);
  return a ? a->s() : dflt.str();
}
std::optional<SmallVector<int64_t>>
NodeContext::attrInts(StringRef name) const {
  const auto *a = attr(name);
  if (!a)
    return std::nullopt;
  return SmallVector<int64_t>(a->ints().begin(), a->ints().end());
}
const onnx::TensorProto *NodeContext::attrTensor(StringRef name) const {
  const auto *a = attr(name);
  return a && a->has_t() ? &a->t() : nullptr;
}

LogicalResult NodeContext::setResult(int i, Value v) const {
  if (i >= node.output_size() || node.output(i).empty())
    return success();
  ImportedValue &out = importer.value(node.output(i));
  out.type = cast<RankedTensorType>(v.getType());
  out.value = v;
  return success();
}
LogicalResult NodeContext::setConst(int i, HostTensor t) const {
  if (i >= node.output_size() || node.output(i).empty())
    return success();
  ImportedValue &out = importer.value(node.output(i));
  out.type = t.type();
  out.constant = std::make_shared<const HostTensor>(std::move(t));
  return success();
}
LogicalResult NodeContext::setAlias(int i, const ImportedValue &v) const {
  if (i >= node.output_size() || node.output(i).empty())
    return success();
  ImportedValue copy = v;
  importer.value(node.output(i)) = std::move(copy);
  return success();
}
LogicalResult NodeContext::setUnsupported(int i, StringRef reason) const {
  if (!outputUsed(i))
    return success();
  return error() << "output " << i << " ('" << node.output(i)
                 << "') is read but " << reason;
}

//===----------------------------------------------------------------------===//
// Diagnostics
//===----------------------------------------------------------------------===//

static void printDiagnostic(Diagnostic &diag, llvm::raw_ostream &os) {
  Location loc = diag.getLocation();
  std::string where, node;
  if (auto name = dyn_cast<NameLoc>(loc)) {
    node = name.getName().str();
    loc = name.getChildLoc();
  }
  if (auto file = dyn_cast<FileLineColLoc>(loc)) {
    where = file.getFilename().str();
    if (file.getLine() != 0)
      where += ":" + std::to_string(file.getLine()) + ":" +
               std::to_string(file.getColumn());
  }
  const char *severity =
      diag.getSeverity() == DiagnosticSeverity::Error     ? "error"
      : diag.getSeverity() == DiagnosticSeverity::Warning ? "warning"
      : diag.getSeverity() == DiagnosticSeverity::Note    ? "note"
                                                          : "remark";
  if (!where.empty())
    os << where << ": ";
  os << severity << ": ";
  if (!node.empty())
    os << node << ": ";
  os << diag.str() << "\n";
  for (Diagnostic &note : diag.getNotes())
    printDiagnostic(note, os);
}

ImportDiagnosticHandler::ImportDiagnosticHandler(MLIRContext *ctx,
                                                 llvm::raw_ostream &os)
    : ScopedDiagnosticHandler(ctx, [&os](Diagnostic &diag) {
        printDiagnostic(diag, os);
        return success();
      }) {}

bool mlir::fsdp::isReadableInput(const std::string &path, std::string &error) {
  if (!llvm::sys::fs::exists(path))
    return true; // the reader's own "cannot read" names it
  ::fsdp::InputFile in;
  ::fsdp::Status s = in.open(path, "the input");
  if (!s)
    error = s.message();
  return s.isOk();
}
