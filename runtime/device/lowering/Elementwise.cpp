//===- Elementwise.cpp - Elementwise ops (device lowering) ----------------===//
//
// Elementwise ops as device operations (declared in LoweringSupport.h; found
// through common/Ops.def by runtime/device/Lowering.cpp).
//
//===----------------------------------------------------------------------===//
#include "runtime/device/lowering/LoweringSupport.h"

namespace fsdp::device::lowering {

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

Status unary(Ctx &c, UnaryKind kind) {
  const TensorRef &x = c.in.in[0], &y = c.in.out[0];
  if ((kind == UnaryKind::Neg || kind == UnaryKind::Abs) &&
      x.dtype == DType::I64) {
    if (x.shape != y.shape || y.dtype != DType::I64)
      return Status::error("expects i64 input and output of one shape");
    c.emit(y.numel(), UnaryInt{kind == UnaryKind::Abs, c.at<int64_t>(x),
                               c.at<int64_t>(y)});
    return Status::ok();
  }
  if (x.shape != y.shape || !floating(x.dtype) || !floating(y.dtype))
    return Status::error("expects float input and output of one shape");
  c.emit(y.numel(),
         Unary{kind, c.at(x), c.at(y), elemOf(x.dtype), elemOf(y.dtype)});
  return Status::ok();
}

Status lowerNot(Ctx &c) {
  const TensorRef &x = c.in.in[0], &y = c.in.out[0];
  if (x.shape != y.shape || x.dtype != DType::I1 || y.dtype != DType::I1)
    return Status::error("expects i1 input and output of one shape");
  c.emit(y.numel(), LogicalNot{c.at<uint8_t>(x), c.at<uint8_t>(y)});
  return Status::ok();
}

Status binary(Ctx &c, BinaryKind kind) {
  const TensorRef &a = c.in.in[0], &b = c.in.in[1], &y = c.in.out[0];
  Strided index;
  if (!broadcastIndex(y.shape, {&a.shape, &b.shape}, index))
    return Status::error("operands " + shapeString(a.shape) + " and " +
                         shapeString(b.shape) + " do not broadcast to " +
                         shapeString(y.shape));
  coalesce(index, 2);
  if (floating(a.dtype) && floating(b.dtype) && floating(y.dtype))
    c.emit(y.numel(),
           Binary{kind, index, c.at(a), c.at(b), c.at(y), elemOf(a.dtype),
                  elemOf(b.dtype), elemOf(y.dtype)});
  else if (a.dtype == DType::I64 && b.dtype == DType::I64 &&
           (y.dtype == DType::I64 || y.dtype == DType::I1))
    c.emit(y.numel(), BinaryInt{kind, index, c.at<int64_t>(a), c.at<int64_t>(b),
                                c.at(y), y.dtype == DType::I1});
  else
    c.emit(y.numel(), BinaryMixed{kind, index, elemOf(a.dtype), elemOf(b.dtype),
                                  elemOf(y.dtype), c.at(a), c.at(b), c.at(y)});
  return Status::ok();
}

Status lowerWhere(Ctx &c) {
  const TensorRef &cond = c.in.in[0], &x = c.in.in[1], &yv = c.in.in[2],
                  &out = c.in.out[0];
  Strided index;
  if (cond.dtype != DType::I1 || x.dtype != out.dtype ||
      yv.dtype != out.dtype ||
      !broadcastIndex(out.shape, {&cond.shape, &x.shape, &yv.shape}, index))
    return Status::error("operands do not broadcast to " +
                         shapeString(out.shape));
  coalesce(index, 3);
  c.emit(out.numel(),
         Select{index, dtypeSize(out.dtype), c.at<uint8_t>(cond),
                c.at<uint8_t>(x), c.at<uint8_t>(yv), c.at<uint8_t>(out)});
  return Status::ok();
}

Status lowerCast(Ctx &c) {
  const TensorRef &x = c.in.in[0], &y = c.in.out[0];
  if (x.numel() != y.numel())
    return Status::error("changes the element count");
  c.emit(y.numel(), Cast{elemOf(x.dtype), elemOf(y.dtype), c.at(x), c.at(y)});
  return Status::ok();
}

Status lowerDropout(Ctx &c) {
  const TensorRef &x = c.in.in[0], &y = c.in.out[0];
  if (x.shape != y.shape || !floating(x.dtype) || !floating(y.dtype))
    return Status::error("expects float input and output of one shape");
  double p = c.attrFloat("p", 0.0);
  if (!(p >= 0 && p <= 1))
    return Status::error("p must lie in [0, 1]");
  if (!c.mem.stepScalars)
    return Status::error("no step counter on the device");
  c.emit(y.numel(),
         Dropout{(uint64_t)c.attrInt("seed", 0),
                 (uint64_t)c.comm.rank() * (uint64_t)x.numel(), (float)p,
                 p < 1 ? (float)(1.0 / (1.0 - p)) : 0.0f, c.mem.stepScalars,
                 c.at(x), c.at(y), elemOf(x.dtype), elemOf(y.dtype)});
  return Status::ok();
}

Status lowerUniform(Ctx &c) {
  const TensorRef &y = c.in.out[0];
  if (!floating(y.dtype))
    return Status::error("draws float values");
  if (!c.mem.stepScalars)
    return Status::error("no step counter on the device");
  c.emit(y.numel(), Uniform{(uint64_t)c.attrInt("seed", 0),
                            (uint64_t)c.comm.rank() * (uint64_t)y.numel(),
                            c.mem.stepScalars, c.at(y), elemOf(y.dtype)});
  return Status::ok();
}

Status lowerGelu(Ctx &c) {
  return unary(c, c.attrString("approximate", "none") == "tanh"
                      ? UnaryKind::GeluTanh
                      : UnaryKind::Gelu);
}
Status lowerGeluGrad(Ctx &c) {
  const TensorRef &x = c.in.in[0], &g = c.in.in[1], &y = c.in.out[0];
  if (x.shape != y.shape || g.shape != y.shape || !floating(x.dtype) ||
      !floating(g.dtype) || !floating(y.dtype))
    return Status::error("expects float x, grad and output of one shape");
  c.emit(y.numel(), GeluGrad{c.attrString("approximate", "none") == "tanh",
                             c.at(x), c.at(g), c.at(y), elemOf(x.dtype),
                             elemOf(g.dtype), elemOf(y.dtype)});
  return Status::ok();
}

} // namespace fsdp::device::lowering
