//===- FsdpTrainOps.cpp - Verifiers of autodiff and optimizer ops ---------===//
#include "dialect/FsdpOps.h"
#include "dialect/ShapeInference.h"

using namespace mlir;
using namespace mlir::fsdp;

static RankedTensorType tensorOf(Value v) {
  return v ? cast<RankedTensorType>(v.getType()) : RankedTensorType();
}

LogicalResult ScatterAddOp::verify() {
  if (getType() != getDest().getType())
    return emitOpError("result type ")
           << getType() << " differs from the destination's "
           << getDest().getType();
  auto expected = shape::gather(getLoc(), tensorOf(getDest()),
                                tensorOf(getIndices()), getAxisAttr().getInt());
  if (failed(expected))
    return failure();
  if (*expected != getUpdates().getType())
    return emitOpError("updates ")
           << getUpdates().getType() << " do not match the gathered shape "
           << *expected;
  return success();
}

LogicalResult InsertSliceOp::verify() {
  if (getType() != getDest().getType())
    return emitOpError("result type ")
           << getType() << " differs from the destination's "
           << getDest().getType();
  RankedTensorType src = tensorOf(getSource());
  if (src.getRank() != getType().getRank() ||
      (int64_t)getStarts().size() != src.getRank() ||
      (int64_t)getStrides().size() != src.getRank())
    return emitOpError("needs one start and stride per dimension of ")
           << getType();
  SmallVector<int64_t> limits;
  for (int64_t d = 0; d < src.getRank(); ++d)
    limits.push_back(getStarts()[d] +
                     (src.getDimSize(d) == 0
                          ? 0
                          : (src.getDimSize(d) - 1) * getStrides()[d] + 1));
  auto box = shape::slice(getLoc(), tensorOf(getDest()), getStarts(), limits,
                          getStrides());
  if (failed(box))
    return failure();
  if (*box != src)
    return emitOpError("source ") << src << " does not fill the box " << *box;
  return success();
}

LogicalResult CrossEntropyGradOp::verify() {
  if (getKind() != "softmax" && getKind() != "nll")
    return emitOpError("kind must be \"softmax\" or \"nll\", got \"")
           << getKind() << "\"";
  if (getType() != getInput().getType())
    return emitOpError("result type ")
           << getType() << " differs from the input's " << getInput().getType();
  auto loss = shape::classificationLoss(getLoc(), tensorOf(getInput()),
                                        tensorOf(getTarget()),
                                        tensorOf(getWeight()), getReduction());
  if (failed(loss))
    return failure();
  if (*loss != getGrad().getType())
    return emitOpError("loss gradient ")
           << getGrad().getType() << " does not match the loss type " << *loss;
  return success();
}

LogicalResult CrossEntropyWithGradOp::verify() {
  if (getReduction() != "mean" && getReduction() != "sum")
    return emitOpError("reduction must be \"mean\" or \"sum\", got \"")
           << getReduction() << "\"";
  if (getInputGrad().getType() != getInput().getType())
    return emitOpError("input_grad type ")
           << getInputGrad().getType() << " differs from the input's "
           << getInput().getType();
  auto loss = shape::classificationLoss(getLoc(), tensorOf(getInput()),
                                        tensorOf(getTarget()),
                                        tensorOf(getWeight()), getReduction());
  if (failed(loss))
    return failure();
  if (*loss != getLoss().getType())
    return emitOpError("loss type ")
           << getLoss().getType() << " differs from " << *loss;
  if (*loss != getGrad().getType())
    return emitOpError("loss gradient ")
           << getGrad().getType() << " does not match the loss type " << *loss;
  return success();
}

/// The parameter (or flat parameter shard) exists and has the gradient's
/// type.
static LogicalResult verifyParam(Operation *op, FlatSymbolRefAttr ref,
                                 Type gradType,
                                 SymbolTableCollection &symbolTable) {
  Operation *target = symbolTable.lookupNearestSymbolFrom(op, ref);
  Type type;
  if (auto param = dyn_cast_or_null<ParameterOp>(target))
    type = param.getType();
  else if (auto flat = dyn_cast_or_null<FlatParameterOp>(target))
    type = flat.getType();
  else
    return op->emitOpError("'")
           << ref.getValue()
           << "' is not an fsdp.parameter or fsdp.flat_parameter";
  if (type != gradType)
    return op->emitOpError("gradient type ")
           << gradType << " differs from the parameter's " << type;
  return success();
}

LogicalResult AdamWOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyParam(*this, getParamAttr(), getGrad().getType(), symbolTable);
}

LogicalResult SgdOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyParam(*this, getParamAttr(), getGrad().getType(), symbolTable);
}

/// An update reads the gradient and reads and writes the parameter (the
/// gradient's type) and each of its `states` moments: AdamW's m and v make
/// 28 bytes a parameter for f32, where its operands alone say 4.
static int64_t updateBytes(Value grad, int states) {
  auto g = cast<RankedTensorType>(grad.getType());
  int64_t bytes = g.getNumElements() * ((g.getElementTypeBitWidth() + 7) / 8);
  return bytes + 2 * bytes * (1 + states);
}

int64_t AdamWOp::getBytesMoved() {
  int64_t copy = 0; // the gather-dtype copy written in the same pass
  if (Value c = getCopy()) {
    auto t = cast<RankedTensorType>(c.getType());
    copy = t.getNumElements() * ((t.getElementTypeBitWidth() + 7) / 8);
  }
  return updateBytes(getGrad(), 2) + copy;
}

/// The arithmetic of an update per element of the gradient, counting a
/// square root and a division as one each: AdamW's 15 (the clipping scale
/// 1, m 3, v 4, the bias-corrected step 6, the decay 1); SGD's 3, 2 more
/// with momentum and 2 more with Nesterov. Without results the interface's
/// default counted none (one per element where the offload copy made a
/// result), and the calibration could price the update by its bytes alone,
/// at the cache's rate where they fit: a serial AdamW took 3x that.
int64_t AdamWOp::getFlops() {
  return 15 * getGrad().getType().getNumElements();
}

int64_t SgdOp::getFlops() {
  int64_t per = 3;
  if (getMomentum().convertToFloat() > 0)
    per += getNesterov() ? 4 : 2;
  return per * getGrad().getType().getNumElements();
}

int64_t SgdOp::getBytesMoved() {
  return updateBytes(getGrad(), getMomentum().convertToFloat() > 0 ? 1 : 0);
}

LogicalResult AdamWOp::verify() {
  if (Value c = getCopy())
    if (cast<RankedTensorType>(c.getType()).getShape() !=
        getGrad().getType().getShape())
      return emitOpError("copy ") << c.getType() << " is not of the shape of "
                                  << getGrad().getType();
  float b1 = getBeta1().convertToFloat(), b2 = getBeta2().convertToFloat();
  if (getLr().convertToFloat() < 0 || b1 < 0 || b1 >= 1 || b2 < 0 || b2 >= 1 ||
      getEps().convertToFloat() <= 0 || getWeightDecay().convertToFloat() < 0)
    return emitOpError("needs lr >= 0, betas in [0, 1), eps > 0 and "
                       "weight_decay >= 0");
  return success();
}

LogicalResult SgdOp::verify() {
  if (getLr().convertToFloat() < 0 || getMomentum().convertToFloat() < 0 ||
      getWeightDecay().convertToFloat() < 0)
    return emitOpError("needs lr, momentum and weight_decay >= 0");
  if (getNesterov() && getMomentum().convertToFloat() == 0)
    return emitOpError("Nesterov momentum needs momentum > 0");
  return success();
}

LogicalResult
AccumulateGradOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyParam(*this, getParamAttr(), getGrad().getType(), symbolTable);
}

LogicalResult ReadGradOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyParam(*this, getParamAttr(), getType(), symbolTable);
}

LogicalResult AttentionGradOp::verify() {
  if (failed(verifyAttentionLayout(*this, getLayout())))
    return failure();
  bool bshd = getLayout() == "bshd";
  auto out = shape::attention(getLoc(), tensorOf(getQ()), tensorOf(getK()),
                              tensorOf(getV()), tensorOf(getMask()), bshd);
  if (failed(out))
    return failure();
  if (getGrad().getType() != *out)
    return emitOpError("output gradient ")
           << getGrad().getType() << " does not match the attention output "
           << *out;
  if (getDq().getType() != getQ().getType() ||
      getDk().getType() != getK().getType() ||
      getDv().getType() != getV().getType())
    return emitOpError("gradient types must be the types of q, k and v");
  if (getOut() && getOut().getType() != *out)
    return emitOpError("saved output ")
           << getOut().getType() << " is not the attention output " << *out;
  if (getLse() &&
      getLse().getType() != shape::attentionLse(tensorOf(getQ()), bshd))
    return emitOpError("saved lse ")
           << getLse().getType() << " is not "
           << shape::attentionLse(tensorOf(getQ()), bshd);
  return verifyEmptyRows(*this, getMask(), getCausal(), getSafeSoftmax(),
                         getAverageEmptyRows());
}

int64_t AttentionGradOp::getFlops() {
  // The forward's two products recomputed, plus dV, dP, dQ and dK: about
  // 2.5 times the forward's, as flash attention's backward.
  auto q = cast<RankedTensorType>(getQ().getType());
  int64_t tk = attentionKeyLength(cast<RankedTensorType>(getK().getType()),
                                  getLayout());
  int64_t flops = 5 * 2 * q.getNumElements() * tk;
  return getCausal() ? flops / 2 : flops; // the hidden half skipped
}

LogicalResult GeluGradOp::verify() {
  if (getApproximate() != "none" && getApproximate() != "tanh")
    return emitOpError("approximate must be \"none\" or \"tanh\", got \"")
           << getApproximate() << "\"";
  return success();
}

int64_t GeluGradOp::getFlops() {
  // About twenty float operations per element, tanh or erf and exp included.
  return 20 * tensorOf(getX()).getNumElements();
}

/// layer_norm_grad and rms_norm_grad: grad and dx typed as x, scale shaped
/// like the normalised axes, and the scale-shaped gradients typed as it.
static LogicalResult verifyNormGrad(Operation *op, Value xv, Value scalev,
                                    Value gradv, int64_t axis) {
  RankedTensorType x = tensorOf(xv);
  if (axis < 0 || axis >= x.getRank())
    return op->emitOpError("axis ") << axis << " out of range for " << x;
  auto normalised = x.getShape().drop_front(axis);
  RankedTensorType scale = tensorOf(scalev);
  if (scale.getShape() != normalised)
    return op->emitOpError("scale ")
           << scale << " is not shaped like the normalised axes of " << x;
  if (gradv.getType() != x || op->getResult(0).getType() != x)
    return op->emitOpError("grad and dx must have the type of x, ") << x;
  for (Value r : op->getResults().drop_front())
    if (r.getType() != scale)
      return op->emitOpError("the scale's gradients must have its type, ")
             << scale;
  return success();
}

LogicalResult LayerNormGradOp::verify() {
  return verifyNormGrad(*this, getX(), getScale(), getGrad(),
                        getAxisAttr().getInt());
}

LogicalResult RmsNormGradOp::verify() {
  return verifyNormGrad(*this, getX(), getScale(), getGrad(),
                        getAxisAttr().getInt());
}

int64_t LayerNormGradOp::getFlops() {
  // The statistics recomputed, x̂, the two row means and dx, and the two
  // column sums: about a dozen operations per element.
  return 12 * tensorOf(getX()).getNumElements();
}

int64_t RmsNormGradOp::getFlops() {
  // As layer_norm_grad's, less the mean and the bias's sum.
  return 9 * tensorOf(getX()).getNumElements();
}

/// A norm's backward kernels read x and the output gradient twice: by rows
/// for dx, then by columns for the scale's (and bias's) sums.
static int64_t normGradBytes(Operation *op) {
  int64_t bytes = 0;
  auto count = [&](Type t) {
    auto tt = cast<RankedTensorType>(t);
    bytes += tt.getNumElements() * ((tt.getElementTypeBitWidth() + 7) / 8);
  };
  for (Type t : op->getOperandTypes())
    count(t);
  for (Type t : op->getResultTypes())
    count(t);
  count(op->getOperand(0).getType()); // x, again
  count(op->getOperand(2).getType()); // grad, again
  return bytes;
}

int64_t LayerNormGradOp::getBytesMoved() { return normGradBytes(*this); }
int64_t RmsNormGradOp::getBytesMoved() { return normGradBytes(*this); }

//===----------------------------------------------------------------------===//
// Convolution gradients
//===----------------------------------------------------------------------===//

/// The forward convolution whose input has type `x` and weight type `w`
/// must produce `grad`'s type.
template <typename OpTy>
static LogicalResult verifyConvGrad(OpTy op, RankedTensorType x,
                                    RankedTensorType w) {
  auto y = shape::conv(op.getLoc(), x, w, nullptr,
                       {op.getStrides(), op.getPads(), op.getDilations(),
                        op.getGroupsAttr().getInt()});
  if (failed(y))
    return failure();
  if (*y != op.getGrad().getType())
    return op.emitOpError("gradient ")
           << op.getGrad().getType() << " does not match the convolution's "
           << "output " << *y;
  return success();
}

/// As the forward's: 2 · output elements · weights per output channel.
static int64_t convFlops(RankedTensorType y, RankedTensorType w) {
  return 2 * y.getNumElements() *
         (w.getNumElements() / std::max<int64_t>(w.getDimSize(0), 1));
}

LogicalResult ConvGradInputOp::verify() {
  return verifyConvGrad(*this, getType(), tensorOf(getW()));
}
int64_t ConvGradInputOp::getFlops() {
  return convFlops(tensorOf(getGrad()), tensorOf(getW()));
}

LogicalResult ConvGradWeightOp::verify() {
  return verifyConvGrad(*this, tensorOf(getX()), getType());
}
int64_t ConvGradWeightOp::getFlops() {
  return convFlops(tensorOf(getGrad()), getType());
}

LogicalResult PoolGradOp::verify() {
  auto y = shape::pool(getLoc(), tensorOf(getX()),
                       {getMode(), getKernel(), getStrides(), getPads(),
                        getDilations(), getCeilMode()});
  if (failed(y))
    return failure();
  if (*y != getGrad().getType())
    return emitOpError("gradient ")
           << getGrad().getType() << " does not match the pooling's output "
           << *y;
  if (getType() != getX().getType())
    return emitOpError("result type ")
           << getType() << " differs from the input's " << getX().getType();
  return success();
}

LogicalResult BatchNormGradOp::verify() {
  auto stats = shape::batchNormStats(getLoc(), tensorOf(getX()),
                                     tensorOf(getScale()), nullptr);
  if (failed(stats))
    return failure();
  if (getGrad().getType() != getX().getType() ||
      getDx().getType() != getX().getType() ||
      getDscale().getType() != *stats || getDbias().getType() != *stats)
    return emitOpError("gradient and results must match x ")
           << getX().getType() << " and the statistics " << *stats;
  return success();
}

LogicalResult
AssignBufferOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto param = dyn_cast_or_null<ParameterOp>(
      symbolTable.lookupNearestSymbolFrom(*this, getParamAttr()));
  if (!param)
    return emitOpError("'") << getParam() << "' is not an fsdp.parameter";
  if (cast<RankedTensorType>(param.getType()).getShape() !=
      tensorOf(getValue()).getShape())
    return emitOpError("value ")
           << getValue().getType() << " does not match the buffer's "
           << param.getType();
  return success();
}
