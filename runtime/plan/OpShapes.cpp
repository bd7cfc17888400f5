//===- OpShapes.cpp - Shape rules shared by the backends ------------------===//
#include "runtime/plan/OpShapes.h"

namespace fsdp {

Status concatLayout(const std::vector<TensorRef> &parts, const TensorRef &whole,
                    int64_t axis, bool split, int64_t &outer, int64_t &inner) {
  if (axis < 0 || axis >= whole.rank())
    return Status::error("bad axis");
  outer = inner = 1;
  for (int64_t d = 0; d < whole.rank(); ++d)
    (d < axis ? outer : inner) *= d == axis ? 1 : whole.shape[d];
  int64_t total = 0;
  const char *role = split ? "output " : "input ";
  for (const TensorRef &p : parts) {
    if (p.rank() != whole.rank() || p.dtype != whole.dtype ||
        p.numel() != outer * p.shape[axis] * inner)
      return Status::error(role + shapeString(p.shape) + " does not match " +
                           shapeString(whole.shape));
    total += p.shape[axis];
  }
  if (total != whole.shape[axis])
    return Status::error(split ? "outputs do not cover the input"
                               : "inputs do not fill the output");
  return Status::ok();
}

Status layerNormGradLayout(const Instruction &in, int64_t axis, int64_t &rows,
                           int64_t &cols) {
  const TensorRef &x = in.in[0], &w = in.in[1], &g = in.in[2];
  if (axis < 0 || axis >= x.rank() || x.shape != g.shape ||
      x.shape != in.out[0].shape)
    return Status::error("bad axis or shapes");
  cols = product(x.shape, axis);
  rows = x.numel() / std::max<int64_t>(cols, 1);
  bool mismatch = w.numel() != cols;
  for (size_t i = 1; i < in.out.size(); ++i)
    mismatch |= in.out[i].numel() != cols;
  if (mismatch)
    return Status::error("scale and its gradients do not match the "
                         "normalised size");
  return Status::ok();
}

namespace {
/// At most four integers of an array attribute, without allocating.
struct SmallInts {
  int64_t v[4] = {};
  size_t n = 0;
  bool ok = true;
  size_t size() const { return n; }
  int64_t operator[](size_t i) const { return v[i]; }
};
SmallInts smallInts(const Instruction &in, const char *name) {
  SmallInts out;
  auto it = in.attrs.find(name);
  if (it == in.attrs.end() || !it->is_array()) {
    out.ok = false;
    return out;
  }
  for (const auto &x : *it) {
    if (!x.is_number_integer() || out.n == 4) {
      out.ok = false;
      return out;
    }
    out.v[out.n++] = x.get<int64_t>();
  }
  return out;
}
} // namespace

Status convGeometryOf(const Instruction &in, const TensorRef &x,
                      const TensorRef &w, const TensorRef &y,
                      ConvGeometry &g) {
  SmallInts strides = smallInts(in, "strides"), pads = smallInts(in, "pads"),
            dilations = smallInts(in, "dilations");
  if (!strides.ok || !pads.ok || !dilations.ok || x.dtype != w.dtype ||
      x.dtype != y.dtype ||
      !convGeometry(x.shape, w.shape, y.shape, strides, pads, dilations,
                    in.attrInt("groups", 1), g))
    return Status::error("convolution of input " + shapeString(x.shape) +
                         " by weight " + shapeString(w.shape) +
                         " does not give " + shapeString(y.shape) +
                         " with its strides, pads, dilations and group");
  return Status::ok();
}

Status poolGeometryOf(const Instruction &in, const TensorRef &x,
                      const TensorRef &y, ConvGeometry &g, bool &max,
                      bool &includePad) {
  SmallInts kernel = smallInts(in, "kernel"), strides = smallInts(in, "strides"),
            pads = smallInts(in, "pads"), dilations = smallInts(in, "dilations");
  std::string mode = in.attrString("mode", "");
  if (mode != "max" && mode != "avg")
    return Status::error("pool mode must be max or avg");
  max = mode == "max";
  includePad = in.attrBool("count_include_pad", false);
  if (!kernel.ok || !strides.ok || !pads.ok || !dilations.ok ||
      x.dtype != y.dtype ||
      !poolGeometry(x.shape, y.shape, kernel, strides, pads, dilations,
                    in.attrBool("ceil_mode", false), g))
    return Status::error("pooling of input " + shapeString(x.shape) +
                         " does not give " + shapeString(y.shape) +
                         " with its kernel, strides, pads and dilations");
  return Status::ok();
}

Status batchNormLayoutOf(const TensorRef &x,
                         std::initializer_list<const TensorRef *> channel,
                         BatchNormLayout &l) {
  if (x.rank() < 2)
    return Status::error("batch norm input " + shapeString(x.shape) +
                         " is not [N, C, ...]");
  l.n = x.shape[0];
  l.c = x.shape[1];
  l.s = product(x.shape, 2);
  for (const TensorRef *t : channel)
    if (t->rank() != 1 || t->shape[0] != l.c || t->dtype != x.dtype)
      return Status::error("per-channel tensor " + shapeString(t->shape) +
                           " does not match " + shapeString(x.shape));
  return Status::ok();
}

Status splitLhsSums(const Instruction &matmul, Instruction &product,
                    Instruction &sums) {
  if (matmul.out.size() != 2 || matmul.in.size() != 2 ||
      matmul.in[0].rank() != 2)
    return Status::error("lhs_sums needs a 2-D lhs, no bias and two results");
  bool ta = matmul.attrBool("transpose_lhs", false);
  const TensorRef &lhs = matmul.in[0], &out = matmul.out[1];
  if (out.rank() != 1 || out.shape[0] != lhs.shape[ta ? 1 : 0] ||
      out.dtype != lhs.dtype)
    return Status::error("sums " + shapeString(out.shape) +
                         " are not one per row of op(lhs) " +
                         shapeString(lhs.shape));
  product = matmul;
  product.out.pop_back();
  product.attrs.erase("lhs_sums");
  sums = matmul;
  sums.op = "reduce_sum";
  sums.in = {lhs};
  sums.out = {out};
  sums.attrs = {{"axes", {ta ? 0 : 1}}, {"keepdims", false}};
  return Status::ok();
}

} // namespace fsdp
