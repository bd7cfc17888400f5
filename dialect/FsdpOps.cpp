//===- FsdpOps.cpp - Verifiers and type inference of fsdp ops -------------===//
#include <cmath>
#include "dialect/FsdpOps.h"
#include "dialect/ShapeInference.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/Support/Path.h"

using namespace mlir;
using namespace mlir::fsdp;
using shape::Loc;

static RankedTensorType tensorOf(Value v) {
  return v ? cast<RankedTensorType>(v.getType()) : RankedTensorType();
}

/// Adds `type` to `out` when inference succeeded.
static LogicalResult push(FailureOr<RankedTensorType> type,
                          SmallVectorImpl<Type> &out) {
  if (failed(type))
    return failure();
  out.push_back(*type);
  return success();
}

//===----------------------------------------------------------------------===//
// Sources
//===----------------------------------------------------------------------===//

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

LogicalResult ConstantOp::inferReturnTypes(MLIRContext *, Loc location,
                                           Adaptor adaptor,
                                           SmallVectorImpl<Type> &out) {
  auto type = dyn_cast<RankedTensorType>(adaptor.getValue().getType());
  if (!type)
    return emitOptionalError(location, "constant value must be a tensor");
  out.push_back(type);
  return success();
}

LogicalResult
GetParameterOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto param =
      symbolTable.lookupNearestSymbolFrom<ParameterOp>(*this, getParamAttr());
  if (!param)
    return emitOpError("'") << getParam() << "' is not an fsdp.parameter";
  // The parameter's type, or its shape in another float type: the
  // parameter read in a mixed-precision step's compute dtype.
  auto have = cast<RankedTensorType>(getType());
  auto want = param.getTensorType();
  bool sameType = have == want;
  bool castRead = have.getShape() == want.getShape() &&
                  isa<FloatType>(have.getElementType()) &&
                  isa<FloatType>(want.getElementType());
  if (!sameType && !castRead)
    return emitOpError("result type ")
           << getType() << " differs from the parameter's " << param.getType();
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

LogicalResult GeluOp::verify() {
  if (getApproximate() != "none" && getApproximate() != "tanh")
    return emitOpError("approximate must be \"none\" or \"tanh\", got \"")
           << getApproximate() << "\"";
  return success();
}

#define FSDP_BINARY_INFER(OP, RESULT_ELEMENT)                                  \
  LogicalResult OP::inferReturnTypes(MLIRContext *ctx, Loc location,           \
                                     Adaptor adaptor,                          \
                                     SmallVectorImpl<Type> &out) {             \
    (void)ctx;                                                                 \
    return push(shape::binary(location, tensorOf(adaptor.getLhs()),            \
                              tensorOf(adaptor.getRhs()), RESULT_ELEMENT),     \
                out);                                                          \
  }
FSDP_BINARY_INFER(AddOp, Type())
FSDP_BINARY_INFER(SubOp, Type())
FSDP_BINARY_INFER(MulOp, Type())
FSDP_BINARY_INFER(DivOp, Type())
FSDP_BINARY_INFER(PowOp, Type())
FSDP_BINARY_INFER(MaxOp, Type())
FSDP_BINARY_INFER(MinOp, Type())
FSDP_BINARY_INFER(AndOp, Type())
FSDP_BINARY_INFER(OrOp, Type())
FSDP_BINARY_INFER(EqualOp, IntegerType::get(ctx, 1))
FSDP_BINARY_INFER(LessOp, IntegerType::get(ctx, 1))
FSDP_BINARY_INFER(GreaterOp, IntegerType::get(ctx, 1))
#undef FSDP_BINARY_INFER

LogicalResult WhereOp::inferReturnTypes(MLIRContext *, Loc location,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &out) {
  return push(shape::where(location, tensorOf(adaptor.getCond()),
                           tensorOf(adaptor.getX()), tensorOf(adaptor.getY())),
              out);
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *, Loc location,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &out) {
  if (failed(push(shape::matmul(location, tensorOf(adaptor.getLhs()),
                                tensorOf(adaptor.getRhs()),
                                adaptor.getTransposeLhs(),
                                adaptor.getTransposeRhs()),
                  out)))
    return failure();
  if (adaptor.getLhsSums()) {
    // One sum per row of op(lhs): [M].
    auto lhs = tensorOf(adaptor.getLhs());
    if (lhs.getRank() != 2)
      return emitOptionalError(location, "matmul lhs_sums needs a 2-D lhs, got ",
                               lhs);
    out.push_back(RankedTensorType::get(
        {lhs.getDimSize(adaptor.getTransposeLhs() ? 1 : 0)},
        lhs.getElementType()));
  }
  return success();
}

LogicalResult MatmulOp::verify() {
  if (getLhsSums() && (getBias() || tensorOf(getRhs()).getRank() != 2))
    return emitOpError("lhs_sums needs 2-D operands and no bias");
  if (!getBias())
    return success();
  RankedTensorType bias = tensorOf(getBias()), result = getResult().getType();
  if (bias.getRank() != 1 || bias.getDimSize(0) != result.getShape().back() ||
      bias.getElementType() != result.getElementType())
    return emitOpError("bias ")
           << bias << " must be one " << result.getElementType()
           << " per column of the result " << result;
  return success();
}

int64_t MatmulOp::getFlops() {
  auto lhs = tensorOf(getLhs());
  int64_t k = getTransposeLhs() ? lhs.getDimSize(lhs.getRank() - 2)
                                : lhs.getShape().back();
  return 2 * getResult().getType().getNumElements() * k;
}

LogicalResult GemmOp::inferReturnTypes(MLIRContext *, Loc location,
                                       Adaptor adaptor,
                                       SmallVectorImpl<Type> &out) {
  return push(shape::gemm(location, tensorOf(adaptor.getA()),
                          tensorOf(adaptor.getB()), tensorOf(adaptor.getC()),
                          adaptor.getTransA(), adaptor.getTransB()),
              out);
}

int64_t GemmOp::getFlops() {
  auto a = tensorOf(getA());
  int64_t k = getTransA() ? a.getDimSize(0) : a.getDimSize(1);
  return 2 * getType().getNumElements() * k +
         (getC() ? getType().getNumElements() : 0);
}

//===----------------------------------------------------------------------===//
// Reductions and normalisations
//===----------------------------------------------------------------------===//

#define FSDP_REDUCE_INFER(OP)                                                  \
  LogicalResult OP::inferReturnTypes(MLIRContext *, Loc location,              \
                                     Adaptor adaptor,                          \
                                     SmallVectorImpl<Type> &out) {             \
    return push(shape::reduce(location, tensorOf(adaptor.getX()),              \
                              adaptor.getAxes(), adaptor.getKeepdims()),       \
                out);                                                          \
  }
FSDP_REDUCE_INFER(ReduceSumOp)
FSDP_REDUCE_INFER(ReduceMeanOp)
FSDP_REDUCE_INFER(ReduceMaxOp)
#undef FSDP_REDUCE_INFER

template <typename OpTy> static LogicalResult verifyAxis(OpTy op) {
  int64_t axis = op.getAxisAttr().getInt();
  if (axis < 0 || axis >= op.getType().getRank())
    return op.emitOpError("axis ")
           << axis << " is out of range for rank " << op.getType().getRank();
  return success();
}

LogicalResult SumSquaresOp::verify() {
  auto x = cast<RankedTensorType>(getX().getType());
  auto y = cast<RankedTensorType>(getType());
  if (y.getRank() != 0 || y.getElementType() != x.getElementType())
    return emitOpError("result must be a scalar of the input's element type, "
                       "not ")
           << y;
  return success();
}

LogicalResult SoftmaxOp::verify() { return verifyAxis(*this); }
LogicalResult LogSoftmaxOp::verify() { return verifyAxis(*this); }

LogicalResult DropoutOp::verify() {
  double p = getP().convertToDouble();
  if (!(p >= 0 && p <= 1))
    return emitOpError("p must lie in [0, 1], got ") << p;
  return success();
}

LogicalResult UniformOp::verify() {
  if (!getType().hasStaticShape())
    return emitOpError("draws a tensor of static shape, got ") << getType();
  return success();
}

/// layer_norm and rms_norm: the result typed as x, a finite epsilon (a
/// negative one is computed as PyTorch computes it), scale (and bias)
/// shaped like the normalised axes.
static LogicalResult verifyNorm(Operation *op, Value x, Value scale,
                                Value bias, int64_t axis, float epsilon,
                                StringRef what) {
  if (op->getResult(0).getType() != x.getType())
    return op->emitOpError("result type ")
           << op->getResult(0).getType() << " differs from the input's "
           << x.getType();
  if (!std::isfinite(epsilon))
    return op->emitOpError("epsilon must be finite");
  return shape::checkLayerNorm(op->getLoc(), tensorOf(x), tensorOf(scale),
                               tensorOf(bias), axis, what);
}

LogicalResult LayerNormOp::verify() {
  return verifyNorm(*this, getX(), getScale(), getBias(),
                    getAxisAttr().getInt(), getEpsilon().convertToFloat(),
                    "layer_norm");
}

LogicalResult RmsNormOp::verify() {
  return verifyNorm(*this, getX(), getScale(), Value(), getAxisAttr().getInt(),
                    getEpsilon().convertToFloat(), "rms_norm");
}

//===----------------------------------------------------------------------===//
// Attention, indexing, losses
//===----------------------------------------------------------------------===//

LogicalResult AttentionOp::inferReturnTypes(MLIRContext *, Loc location,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &out) {
  bool bshd = adaptor.getLayout() == "bshd";
  if (failed(push(shape::attention(location, tensorOf(adaptor.getQ()),
                                   tensorOf(adaptor.getK()),
                                   tensorOf(adaptor.getV()),
                                   tensorOf(adaptor.getMask()), bshd),
                  out)))
    return failure();
  if (adaptor.getWithLse())
    out.push_back(shape::attentionLse(tensorOf(adaptor.getQ()), bshd));
  return success();
}

LogicalResult mlir::fsdp::verifyEmptyRows(Operation *op, Value mask,
                                          bool causal, bool safe,
                                          bool average) {
  if (!average)
    return success();
  // A boolean mask's hidden keys: masked_fill's, whose scores are all equal
  // in a row that hides every key. Causal's hidden keys are -inf, and the
  // safe softmax gives such a row zeros: neither is an average.
  if (!mask || !tensorOf(mask).getElementType().isInteger(1) || causal || safe)
    return op->emitOpError("average_empty_rows needs a boolean mask, and "
                           "neither causal nor safe_softmax");
  return success();
}

LogicalResult mlir::fsdp::verifyAttentionLayout(Operation *op,
                                                StringRef layout) {
  if (layout != "bhsd" && layout != "bshd")
    return op->emitOpError("layout must be \"bhsd\" or \"bshd\", got \"")
           << layout << "\"";
  return success();
}

LogicalResult AttentionOp::verify() {
  if (failed(verifyAttentionLayout(*this, getLayout())))
    return failure();
  return verifyEmptyRows(*this, getMask(), getCausal(), getSafeSoftmax(),
                         getAverageEmptyRows());
}

int64_t mlir::fsdp::attentionKeyLength(RankedTensorType k, StringRef layout) {
  return k.getDimSize(k.getRank() - (layout == "bshd" ? 3 : 2));
}

int64_t AttentionOp::getFlops() {
  auto q = tensorOf(getQ());
  // (Read in the layout: "bshd"'s second-to-last dimension is the heads,
  // and pricing by it made a fused layout's attention 30-60x too cheap.)
  int64_t tk = attentionKeyLength(tensorOf(getK()), getLayout());
  // q·kᵀ and p·v, plus the softmax over the scores; causal attention
  // skips the hidden half of the score blocks, as flash kernels do.
  int64_t flops = 2 * q.getNumElements() * tk +
                  2 * getResult().getType().getNumElements() * tk +
                  5 * (q.getNumElements() / q.getShape().back()) * tk;
  return getCausal() ? flops / 2 : flops;
}

LogicalResult ConvOp::inferReturnTypes(MLIRContext *, Loc location,
                                       Adaptor adaptor,
                                       SmallVectorImpl<Type> &out) {
  return push(shape::conv(location, tensorOf(adaptor.getX()),
                          tensorOf(adaptor.getW()), tensorOf(adaptor.getBias()),
                          {adaptor.getStrides(), adaptor.getPads(),
                           adaptor.getDilations(),
                           adaptor.getGroupsAttr().getInt()}),
              out);
}

int64_t ConvOp::getFlops() {
  // A multiply-add per output element and weight of its group; the bias.
  auto w = tensorOf(getW());
  int64_t y = getType().getNumElements();
  return 2 * y * (w.getNumElements() / std::max<int64_t>(w.getDimSize(0), 1)) +
         (getBias() ? y : 0);
}

LogicalResult PoolOp::inferReturnTypes(MLIRContext *, Loc location,
                                       Adaptor adaptor,
                                       SmallVectorImpl<Type> &out) {
  return push(shape::pool(location, tensorOf(adaptor.getX()),
                          {adaptor.getMode(), adaptor.getKernel(),
                           adaptor.getStrides(), adaptor.getPads(),
                           adaptor.getDilations(), adaptor.getCeilMode()}),
              out);
}

LogicalResult BatchNormOp::inferReturnTypes(MLIRContext *, Loc location,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &out) {
  auto stats = shape::batchNormStats(location, tensorOf(adaptor.getX()),
                                     tensorOf(adaptor.getScale()),
                                     tensorOf(adaptor.getBias()));
  if (failed(stats))
    return failure();
  out.append({adaptor.getX().getType(), *stats, *stats});
  return success();
}

LogicalResult GatherOp::inferReturnTypes(MLIRContext *, Loc location,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &out) {
  return push(shape::gather(location, tensorOf(adaptor.getData()),
                            tensorOf(adaptor.getIndices()),
                            adaptor.getAxisAttr().getInt()),
              out);
}

#define FSDP_LOSS_INFER(OP)                                                    \
  LogicalResult OP::inferReturnTypes(MLIRContext *, Loc location,              \
                                     Adaptor adaptor,                          \
                                     SmallVectorImpl<Type> &out) {             \
    return push(shape::classificationLoss(                                     \
                    location, tensorOf(adaptor.getInput()),                    \
                    tensorOf(adaptor.getTarget()),                             \
                    tensorOf(adaptor.getWeight()), adaptor.getReduction()),    \
                out);                                                          \
  }
FSDP_LOSS_INFER(CrossEntropyOp)
FSDP_LOSS_INFER(NllLossOp)
#undef FSDP_LOSS_INFER

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::verify() {
  auto in = tensorOf(getX());
  if (in.getElementType() != getType().getElementType())
    return emitOpError("element type changes from ")
           << in.getElementType() << " to " << getType().getElementType();
  if (in.getNumElements() != getType().getNumElements())
    return emitOpError("element count changes from ")
           << in.getNumElements() << " to " << getType().getNumElements();
  return success();
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *, Loc location,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &out) {
  return push(
      shape::transpose(location, tensorOf(adaptor.getX()), adaptor.getPerm()),
      out);
}

LogicalResult SliceOp::inferReturnTypes(MLIRContext *, Loc location,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &out) {
  return push(shape::slice(location, tensorOf(adaptor.getX()),
                           adaptor.getStarts(), adaptor.getLimits(),
                           adaptor.getStrides()),
              out);
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *, Loc location,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &out) {
  return push(shape::concat(location, adaptor.getInputs().getTypes(),
                            adaptor.getAxisAttr().getInt()),
              out);
}

LogicalResult SplitOp::inferReturnTypes(MLIRContext *, Loc location,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &out) {
  auto types = shape::split(location, tensorOf(adaptor.getX()),
                            adaptor.getAxisAttr().getInt(), adaptor.getSizes());
  if (failed(types))
    return failure();
  llvm::append_range(out, *types);
  return success();
}

LogicalResult BroadcastOp::verify() {
  return shape::checkBroadcastTo(getLoc(), tensorOf(getX()), getType());
}

LogicalResult ArgsortOp::verify() {
  auto x = tensorOf(getX());
  if (getType().getShape() != x.getShape())
    return emitOpError("result ") << getType() << " must have the shape of " << x;
  if (getAxis() < 0 || getAxis() >= std::max<int64_t>(x.getRank(), 1) ||
      (x.getRank() == 0 && getAxis() != 0))
    return emitOpError("axis ") << getAxis() << " is out of range for " << x;
  return success();
}

LogicalResult TriluOp::verify() {
  if (getType().getRank() < 2)
    return emitOpError("needs rank >= 2, got ") << getType();
  return success();
}

//===----------------------------------------------------------------------===//
// Distribution
//===----------------------------------------------------------------------===//

LogicalResult ParameterOp::verify() {
  if (std::optional<ArrayAttr> classes = getModuleClasses()) {
    size_t depth = getModulePath().empty()
                       ? 1
                       : 2 + (size_t)llvm::count(getModulePath(), '.');
    if (classes->size() != depth)
      return emitOpError("module_classes has ")
             << classes->size() << " classes; module path '" << getModulePath()
             << "' needs " << depth << " (the root's, then one per component)";
  }
  bool external = getSource() == "external";
  if (!external && getSource() != "initializer")
    return emitOpError("source must be \"initializer\" or \"external\", got \"")
           << getSource() << "\"";
  if (!external) {
    if (getLocation() || getOffset() || getLength())
      return emitOpError("location/offset/length only apply to external data");
    return success();
  }
  if (!getLocation() || !getOffset() || !getLength())
    return emitOpError("external data needs location, offset and length");
  StringRef location = *getLocation();
  if (location.empty() || llvm::sys::path::is_absolute(location) ||
      llvm::is_contained(llvm::make_range(llvm::sys::path::begin(location),
                                          llvm::sys::path::end(location)),
                         ".."))
    return emitOpError("external data location '")
           << location << "' must be a relative path without '..'";
  RankedTensorType type = getTensorType();
  int64_t bytes =
      type.getNumElements() * ((type.getElementTypeBitWidth() + 7) / 8);
  int64_t offset = getOffsetAttr().getInt(), length = getLengthAttr().getInt();
  if (offset < 0 || length != bytes)
    return emitOpError("external data length ")
           << length << " at offset " << offset << " does not hold " << type
           << " (" << bytes << " bytes)";
  return success();
}

LogicalResult UnitOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  if (getParams().empty())
    return emitOpError("has no parameters");
  llvm::SmallPtrSet<Attribute, 16> mine;
  for (Attribute a : getParams()) {
    auto ref = cast<FlatSymbolRefAttr>(a);
    if (!symbolTable.lookupNearestSymbolFrom<ParameterOp>(*this, ref))
      return emitOpError("'") << ref.getValue() << "' is not an fsdp.parameter";
    if (!mine.insert(ref).second)
      return emitOpError("lists '") << ref.getValue() << "' twice";
  }
  // Report the conflict on the later unit: the earlier one is fine alone.
  for (auto other : (*this)->getParentOp()->getRegion(0).getOps<UnitOp>()) {
    if (other == *this)
      break;
    for (Attribute a : other.getParams())
      if (mine.contains(a))
        return emitOpError("parameter '")
               << cast<FlatSymbolRefAttr>(a).getValue()
               << "' also belongs to unit '" << other.getSymName() << "'";
  }
  return success();
}

LogicalResult FlatParameterOp::verify() {
  RankedTensorType shard = getShardType();
  int64_t group = getGroupSizeAttr().getInt(), numel = getNumelAttr().getInt();
  if (shard.getRank() != 1)
    return emitOpError("shard type must be 1-D, got ") << shard;
  if (shard.getDimSize(0) * group < numel)
    return emitOpError("shards of ")
           << shard.getDimSize(0) << " elements over " << group
           << " ranks cannot hold " << numel << " elements";
  if ((int64_t)getOffsets().size() != (int64_t)getParams().size())
    return emitOpError("has ") << getParams().size() << " parameters but "
                               << getOffsets().size() << " offsets";
  if (auto offload = getOffload()) {
    if (*offload != "optimizer" && *offload != "all")
      return emitOpError("offload must be \"optimizer\" or \"all\", got \"")
             << *offload << "\"";
    if ((*offload == "optimizer") != getDeviceCopy().has_value())
      return emitOpError("offload = \"optimizer\" and a device_copy go "
                         "together");
  } else if (getDeviceCopy()) {
    return emitOpError("a device_copy needs offload = \"optimizer\"");
  }
  return success();
}

LogicalResult
FlatParameterOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  if (!symbolTable.lookupNearestSymbolFrom<UnitOp>(*this, getUnitAttr()))
    return emitOpError("'") << getUnit() << "' is not an fsdp.unit";
  int64_t end = 0;
  for (auto [a, offset] : llvm::zip(getParams(), getOffsets())) {
    auto ref = cast<FlatSymbolRefAttr>(a);
    auto param = symbolTable.lookupNearestSymbolFrom<ParameterOp>(*this, ref);
    if (!param)
      return emitOpError("'") << ref.getValue() << "' is not an fsdp.parameter";
    if (param.getTensorType().getElementType() !=
        getShardType().getElementType())
      return emitOpError("parameter '")
             << ref.getValue() << "' has element type "
             << param.getTensorType().getElementType() << ", the buffer "
             << getShardType().getElementType();
    if (offset < end)
      return emitOpError("parameter '")
             << ref.getValue() << "' at offset " << offset
             << " overlaps the previous one (which ends at " << end << ")";
    end = offset + param.getTensorType().getNumElements();
  }
  if (end > getNumelAttr().getInt())
    return emitOpError("parameters end at element ")
           << end << ", past numel " << getNumelAttr().getInt();
  return success();
}

LogicalResult GetShardOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto flat = symbolTable.lookupNearestSymbolFrom<FlatParameterOp>(
      *this, getFlatAttr());
  if (!flat)
    return emitOpError("'") << getFlat() << "' is not an fsdp.flat_parameter";
  if (flat.getType() != getType())
    return emitOpError("result type ")
           << getType() << " differs from the shard's " << flat.getType();
  return success();
}

LogicalResult ParamViewOp::verify() {
  auto in = cast<RankedTensorType>(getInput().getType());
  RankedTensorType out = getType();
  int64_t offset = getOffsetAttr().getInt();
  if (in.getElementType() != out.getElementType())
    return emitOpError("element type ")
           << out.getElementType() << " differs from the buffer's "
           << in.getElementType();
  if (!in.hasStaticShape() ||
      offset + out.getNumElements() > in.getNumElements())
    return emitOpError("view of ")
           << out.getNumElements() << " elements at offset " << offset
           << " does not fit in " << in;
  return success();
}

LogicalResult ReshardOp::verify() {
  auto in = cast<RankedTensorType>(getInput().getType());
  RankedTensorType out = getType();
  int64_t n = getGroupSizeAttr().getInt();
  if (in.getElementType() != out.getElementType() ||
      in.getNumElements() != out.getNumElements() * n)
    return emitOpError("keeps 1/")
           << n << " of " << in << ", which is not " << out;
  return success();
}

LogicalResult PackOp::verify() {
  RankedTensorType out = getType();
  if (getOffsets().size() != getInputs().size())
    return emitOpError("has ") << getInputs().size() << " inputs but "
                               << getOffsets().size() << " offsets";
  for (auto [v, offset] : llvm::zip(getInputs(), getOffsets())) {
    auto t = cast<RankedTensorType>(v.getType());
    if (t.getElementType() != out.getElementType() &&
        !(isa<FloatType>(t.getElementType()) &&
          isa<FloatType>(out.getElementType())))
      return emitOpError("input ")
             << t << " differs in element type from " << out
             << " (only floats convert)";
    if (offset < 0 || offset + t.getNumElements() > out.getNumElements())
      return emitOpError("input ")
             << t << " at offset " << offset << " does not fit in " << out;
  }
  return success();
}

/// Every future is completed by exactly one fsdp.wait.
static LogicalResult verifyFutureWaited(Operation *op, Value future) {
  if (!future.hasOneUse() || !isa<WaitOp>(*future.getUsers().begin()))
    return op->emitOpError("future must be completed by exactly one fsdp.wait");
  return success();
}

static LogicalResult verifyReduction(Operation *op, StringRef reduction) {
  if (reduction != "sum" && reduction != "avg")
    return op->emitOpError("reduction must be \"sum\" or \"avg\", got \"")
           << reduction << "\"";
  return success();
}

static LogicalResult verifyGroup(Operation *op) {
  auto group = op->getAttrOfType<StringAttr>("group");
  if (group && group.getValue() != "world" && group.getValue() != "shard" &&
      group.getValue() != "replicate" && group.getValue() != "block")
    return op->emitOpError("group must be \"world\", \"shard\", "
                           "\"replicate\" or \"block\", got \"")
           << group.getValue() << "\"";
  return success();
}

static RankedTensorType futureValue(Value future) {
  return cast<FutureType>(future.getType()).getValueType();
}

LogicalResult AllGatherStartOp::verify() {
  RankedTensorType in = getInput().getType(), out = futureValue(getFuture());
  int64_t group = getGroupSizeAttr().getInt();
  if (in.getRank() < 1 || in.getRank() != out.getRank() ||
      in.getElementType() != out.getElementType() ||
      in.getShape().drop_front() != out.getShape().drop_front() ||
      out.getDimSize(0) != in.getDimSize(0) * group)
    return emitOpError("gathers ")
           << in << " over " << getGroupSize() << " ranks, which gives "
           << "dimension 0 times the group size, not " << out;
  if (failed(verifyGroup(*this)))
    return failure();
  return verifyFutureWaited(*this, getFuture());
}

LogicalResult ReduceScatterStartOp::verify() {
  RankedTensorType in = getInput().getType(), out = futureValue(getFuture());
  int64_t group = getGroupSizeAttr().getInt();
  if (in.getRank() < 1 || in.getDimSize(0) % group != 0)
    return emitOpError("dimension 0 of ")
           << in << " is not divisible by the group size " << getGroupSize();
  if (in.getRank() != out.getRank() ||
      in.getElementType() != out.getElementType() ||
      in.getShape().drop_front() != out.getShape().drop_front() ||
      out.getDimSize(0) * group != in.getDimSize(0))
    return emitOpError("scatters ")
           << in << " over " << getGroupSize() << " ranks, which gives "
           << "dimension 0 divided by the group size, not " << out;
  if (failed(verifyReduction(*this, getReduction())) ||
      failed(verifyGroup(*this)))
    return failure();
  return verifyFutureWaited(*this, getFuture());
}

LogicalResult AllReduceOp::verify() {
  if (getInput().getType() != futureValue(getFuture()))
    return emitOpError("result ")
           << futureValue(getFuture()) << " differs from the input "
           << getInput().getType();
  if (failed(verifyReduction(*this, getReduction())) ||
      failed(verifyGroup(*this)))
    return failure();
  return verifyFutureWaited(*this, getFuture());
}

LogicalResult CopyStartOp::verify() {
  if (getTo() != "host" && getTo() != "device")
    return emitOpError("to must be \"host\" or \"device\", got \"")
           << getTo() << "\"";
  if (getInput().getType() != futureValue(getFuture()))
    return emitOpError("result ")
           << futureValue(getFuture()) << " differs from the input "
           << getInput().getType();
  if (auto into = getIntoAttr()) {
    // Into a host buffer (to the host) or a flat's device copy (to the
    // device), of the input's type.
    Operation *target = SymbolTable::lookupNearestSymbolFrom(*this, into);
    Type type;
    if (auto b = dyn_cast_or_null<HostBufferOp>(target); b && getTo() == "host")
      type = b.getType();
    else if (auto f = dyn_cast_or_null<FlatParameterOp>(target);
             f && getTo() == "device" && f.getDeviceCopy())
      type = RankedTensorType::get(f.getShardType().getShape(),
                                   *f.getDeviceCopy());
    if (!type)
      return emitOpError("copies into '")
             << into.getValue()
             << "', which is neither a host buffer (to the host) nor an "
                "offloaded flat parameter's device copy (to the device)";
    if (type != getInput().getType())
      return emitOpError("copies ") << getInput().getType() << " into '"
                                    << into.getValue() << "' of " << type;
  }
  return verifyFutureWaited(*this, getFuture());
}

/// The offloaded flat parameter `flat` names whose device copy has type
/// `type` (the shard's shape in its device_copy element type).
static LogicalResult verifyDeviceCopy(Operation *op, FlatSymbolRefAttr flat,
                                      Type type,
                                      SymbolTableCollection &symbolTable) {
  auto f = symbolTable.lookupNearestSymbolFrom<FlatParameterOp>(op, flat);
  if (!f)
    return op->emitOpError("'") << flat.getValue()
                                << "' is not an fsdp.flat_parameter";
  if (!f.getDeviceCopy())
    return op->emitOpError("'") << flat.getValue()
                                << "' has no device copy (offload = "
                                   "\"optimizer\")";
  auto want = RankedTensorType::get(f.getShardType().getShape(),
                                    *f.getDeviceCopy());
  if (type != want)
    return op->emitOpError("type ") << type << " differs from the device copy's "
                                    << want;
  return success();
}

LogicalResult
GetHostBufferOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto b = symbolTable.lookupNearestSymbolFrom<HostBufferOp>(*this,
                                                            getBufferAttr());
  if (!b)
    return emitOpError("'") << getBuffer() << "' is not an fsdp.host_buffer";
  if (b.getType() != getType())
    return emitOpError("type ") << getType() << " differs from the buffer's "
                                << b.getType();
  return success();
}

LogicalResult
GetDeviceCopyOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyDeviceCopy(*this, getFlatAttr(), getType(), symbolTable);
}

LogicalResult WaitOp::inferReturnTypes(MLIRContext *, Loc location,
                                       Adaptor adaptor,
                                       SmallVectorImpl<Type> &out) {
  auto future = dyn_cast<FutureType>(adaptor.getFuture().getType());
  if (!future)
    return emitOptionalError(location, "operand must be an !fsdp.future");
  out.push_back(future.getValueType());
  return success();
}

LogicalResult FreeOp::verify() {
  Value value = getValue();
  Block *block = (*this)->getBlock();
  for (Operation *user : value.getUsers()) {
    if (user == getOperation())
      continue;
    if (isa<FreeOp>(user)) {
      if (user->getBlock() == block && user->isBeforeInBlock(getOperation()))
        return emitOpError("value is freed more than once");
      continue;
    }
    Operation *inBlock = block->findAncestorOpInBlock(*user);
    if (inBlock && getOperation()->isBeforeInBlock(inBlock))
      return emitOpError("value is used after it is freed")
                 .attachNote(user->getLoc())
             << "used here";
  }
  return success();
}

#define GET_OP_CLASSES
#include "dialect/FsdpOps.cpp.inc"
