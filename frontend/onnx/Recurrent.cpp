//===- Recurrent.cpp - RNN, GRU and LSTM (ONNX) ---------------------------===//
//
// The recurrent ops torch.onnx.export writes for nn.RNN, nn.GRU and nn.LSTM
// (one node a layer), unrolled over the sequence: the input projection of
// every step is one GEMM, then each step is a [batch, hidden] product with
// the recurrent weights and the gates' elementwise ops, so the gradient is
// that of ordinary ops (backpropagation through time). Forward, reverse and
// bidirectional; layouts 0 ([seq, batch, ...]) and 1 ([batch, seq, ...]);
// the initial states; GRU's linear_before_reset both ways. Refused, by
// name: per-sample sequence lengths shorter than the sequence (padding a
// plan cannot skip), clip, LSTM peepholes and input_forget, activations
// other than ONNX's defaults (RNN: Tanh, Relu or Sigmoid).
//
//===----------------------------------------------------------------------===//
#include "frontend/onnx/OnnxOpsSupport.h"

using namespace mlir;
using namespace mlir::fsdp;
using namespace mlir::fsdp::onnx_ops;

namespace {

enum class Cell { Rnn, Gru, Lstm };

/// Builds the unrolled ops of one node.
struct Unroll {
  NodeContext &n;
  Type elem;

  RankedTensorType typeOf(ArrayRef<int64_t> shape) const {
    return RankedTensorType::get(shape, elem);
  }
  Value reshape(Value v, ArrayRef<int64_t> shape) {
    if (shapeOf(v) == SmallVector<int64_t>(shape))
      return v;
    return build<ReshapeOp>(n, typeOf(shape), {v});
  }
  Value slice(Value v, int64_t axis, int64_t lo, int64_t hi) {
    return sliceAxis(n, v, axis, lo, hi);
  }
  Value concat(ArrayRef<Value> parts, int64_t axis) {
    return concatAxis(n, parts, axis);
  }
  /// a · bᵀ for a [m, k] and b [o, k].
  Value linear(Value a, Value b) {
    SmallVector<int64_t> as = shapeOf(a), bs = shapeOf(b);
    return build<MatmulOp>(n, typeOf({as[0], bs[0]}), {a, b},
                           {boolAttr(n, "transpose_lhs", false),
                            boolAttr(n, "transpose_rhs", true)});
  }
  Value add(Value a, Value b) { return broadcastBinary<AddOp>(n, a, b); }
  Value sub(Value a, Value b) { return broadcastBinary<SubOp>(n, a, b); }
  Value mul(Value a, Value b) { return broadcastBinary<MulOp>(n, a, b); }
  Value apply(StringRef f, Value x) {
    if (f == "Sigmoid")
      return build<SigmoidOp>(n, x.getType(), {x});
    if (f == "Relu")
      return build<ReluOp>(n, x.getType(), {x});
    return build<TanhOp>(n, x.getType(), {x});
  }
  Value sigmoid(Value x) { return apply("Sigmoid", x); }
  Value tanh(Value x) { return apply("Tanh", x); }
};

/// The activation of each direction (RNN), or failure with the reason.
FailureOr<SmallVector<std::string>> activations(NodeContext &n, Cell cell,
                                                int64_t directions) {
  SmallVector<std::string> defaults;
  if (cell == Cell::Rnn)
    defaults.assign(directions, "Tanh");
  else if (cell == Cell::Gru)
    for (int64_t d = 0; d < directions; ++d)
      defaults.append({"Sigmoid", "Tanh"});
  else
    for (int64_t d = 0; d < directions; ++d)
      defaults.append({"Sigmoid", "Tanh", "Tanh"});
  const onnx::AttributeProto *a = n.attr("activations");
  if (!a)
    return defaults;
  SmallVector<std::string> given(a->strings().begin(), a->strings().end());
  if (cell == Cell::Rnn && (int64_t)given.size() == directions &&
      llvm::all_of(given, [](const std::string &f) {
        return f == "Tanh" || f == "Relu" || f == "Sigmoid";
      }))
    return given;
  if (given == defaults)
    return given;
  return failure();
}

LogicalResult lowerRecurrent(NodeContext &n, Cell cell) {
  StringRef op = cell == Cell::Rnn ? "RNN" : cell == Cell::Gru ? "GRU" : "LSTM";
  int maxInputs = cell == Cell::Lstm ? 8 : 6;
  if (n.numInputs() < 3 || n.numInputs() > maxInputs)
    return n.error() << "expects 3 to " << maxInputs << " inputs, got "
                     << n.numInputs();
  for (int i = 0; i < 3; ++i)
    if (!n.hasInput(i))
      return n.error() << "required input " << i << " is missing";
  int64_t gates = cell == Cell::Rnn ? 1 : cell == Cell::Gru ? 3 : 4;
  RankedTensorType x = n.inputType(0), w = n.inputType(1), r = n.inputType(2);
  Type elem = x.getElementType();
  if (!isa<FloatType>(elem) || x.getRank() != 3 || w.getRank() != 3 ||
      r.getRank() != 3)
    return n.error() << op << " needs float X, W and R of rank 3, got " << x
                     << ", " << w << ", " << r;
  std::string direction = n.attrString("direction", "forward");
  if (direction != "forward" && direction != "reverse" &&
      direction != "bidirectional")
    return n.error() << "direction '" << direction
                     << "' is not forward, reverse or bidirectional";
  int64_t dirs = direction == "bidirectional" ? 2 : 1;
  int64_t layout = n.attrInt("layout", 0);
  if (layout != 0 && layout != 1)
    return n.error() << "layout " << layout << " is not 0 or 1";
  int64_t seq = x.getDimSize(layout == 0 ? 0 : 1),
          batch = x.getDimSize(layout == 0 ? 1 : 0), in = x.getDimSize(2);
  int64_t hidden = w.getDimSize(1) / gates;
  if (auto h = n.attrInt("hidden_size", hidden); h != hidden)
    return n.error() << "hidden_size " << h << " disagrees with W " << w;
  if (w.getShape() != ArrayRef<int64_t>{dirs, gates * hidden, in} ||
      r.getShape() != ArrayRef<int64_t>{dirs, gates * hidden, hidden} ||
      w.getElementType() != elem || r.getElementType() != elem)
    return n.error() << op << " weights " << w << " and " << r << " do not fit "
                     << dirs << " direction(s), " << gates << " gate(s) of "
                     << hidden << " over " << in << " inputs";
  if (n.attr("clip"))
    return n.error() << "clip is not supported";
  if (cell == Cell::Lstm && n.attrInt("input_forget", 0))
    return n.error() << "input_forget is not supported";
  if (cell == Cell::Lstm && n.numInputs() > 7 && n.hasInput(7))
    return n.error() << "peepholes (input P) are not supported";
  auto acts = activations(n, cell, dirs);
  if (failed(acts))
    return n.error() << "activations other than ONNX's defaults are not "
                        "supported (RNN: Tanh, Relu or Sigmoid per direction)";
  bool hasBias = n.numInputs() > 3 && n.hasInput(3);
  if (hasBias && n.inputType(3) != RankedTensorType::get(
                                       {dirs, 2 * gates * hidden}, elem))
    return n.error() << "B " << n.inputType(3) << " must be [" << dirs << ", "
                     << 2 * gates * hidden << "]";
  if (n.numInputs() > 4 && n.hasInput(4)) {
    const HostTensor *lens = n.constInput(4);
    if (!lens)
      return n.error() << "sequence_lens must be known at import time";
    for (int64_t i = 0; i < lens->numel(); ++i)
      if (lens->asInt(i) != seq)
        return n.error() << "sequence_lens shorter than the sequence (" << seq
                         << ") are not supported: a plan does not skip padding";
  }
  auto stateType = RankedTensorType::get(
      layout == 0 ? SmallVector<int64_t>{dirs, batch, hidden}
                  : SmallVector<int64_t>{batch, dirs, hidden},
      elem);
  for (int i : {5, 6})
    if (i < n.numInputs() && n.hasInput(i) && (i == 5 || cell == Cell::Lstm) &&
        n.inputType(i) != stateType)
      return n.error() << "initial state " << n.inputType(i) << " must be "
                       << stateType;
  bool beforeReset = n.attrInt("linear_before_reset", 0) != 0;

  Unroll u{n, elem};
  // X as [seq, batch, in]; states as [dirs, batch, hidden].
  Value xs = n.operand(0);
  if (layout == 1)
    xs = build<TransposeOp>(n, u.typeOf({seq, batch, in}), {xs},
                            {arrayAttr(n, "perm", {1, 0, 2})});
  auto state = [&](int i) -> Value {
    if (i >= n.numInputs() || !n.hasInput(i))
      return Value();
    Value s = n.operand(i);
    if (layout == 1)
      s = build<TransposeOp>(n, u.typeOf({dirs, batch, hidden}), {s},
                             {arrayAttr(n, "perm", {1, 0, 2})});
    return s;
  };
  Value h0 = state(5), c0 = cell == Cell::Lstm ? state(6) : Value();
  Value zeros = splatConstant(n, elem, {batch, hidden}, 0.0);
  Value flat = u.reshape(xs, {seq * batch, in});

  SmallVector<Value> ys, lastH, lastC;
  for (int64_t d = 0; d < dirs; ++d) {
    bool reverse = direction == "reverse" || d == 1;
    Value wd = u.reshape(u.slice(n.operand(1), 0, d, d + 1), {gates * hidden, in});
    Value rd = u.reshape(u.slice(n.operand(2), 0, d, d + 1),
                         {gates * hidden, hidden});
    Value wb, rb;
    if (hasBias) {
      Value bd = u.reshape(u.slice(n.operand(3), 0, d, d + 1), {2 * gates * hidden});
      wb = u.slice(bd, 0, 0, gates * hidden);
      rb = u.slice(bd, 0, gates * hidden, 2 * gates * hidden);
    }
    // Every step's input projection at once: [seq, batch, gates·hidden].
    Value xw = u.linear(flat, wd);
    if (wb)
      xw = u.add(xw, wb);
    xw = u.reshape(xw, {seq, batch, gates * hidden});
    Value h = h0 ? u.reshape(u.slice(h0, 0, d, d + 1), {batch, hidden}) : zeros;
    Value c = c0 ? u.reshape(u.slice(c0, 0, d, d + 1), {batch, hidden}) : zeros;
    SmallVector<Value> steps(seq);
    auto gate = [&](Value v, int64_t k) {
      return u.slice(v, 1, k * hidden, (k + 1) * hidden);
    };
    for (int64_t s = 0; s < seq; ++s) {
      int64_t t = reverse ? seq - 1 - s : s;
      Value xt = u.reshape(u.slice(xw, 0, t, t + 1), {batch, gates * hidden});
      if (cell == Cell::Rnn) {
        Value hr = u.linear(h, rd);
        if (rb)
          hr = u.add(hr, rb);
        h = u.apply((*acts)[d], u.add(xt, hr));
      } else if (cell == Cell::Gru) {
        // ONNX's gate order is z, r, h.
        Value rz = u.slice(rd, 0, 0, 2 * hidden), rh = u.slice(rd, 0, 2 * hidden, 3 * hidden);
        Value hzr = u.linear(h, rz);
        if (rb)
          hzr = u.add(hzr, u.slice(rb, 0, 0, 2 * hidden));
        Value z = u.sigmoid(u.add(gate(xt, 0), gate(hzr, 0)));
        Value rg = u.sigmoid(u.add(gate(xt, 1), gate(hzr, 1)));
        Value cand;
        Value rbh = rb ? u.slice(rb, 0, 2 * hidden, 3 * hidden) : Value();
        if (beforeReset) {
          Value hh = u.linear(h, rh);
          if (rbh)
            hh = u.add(hh, rbh);
          cand = u.tanh(u.add(gate(xt, 2), u.mul(rg, hh)));
        } else {
          Value hh = u.linear(u.mul(rg, h), rh);
          if (rbh)
            hh = u.add(hh, rbh);
          cand = u.tanh(u.add(gate(xt, 2), hh));
        }
        // h = (1 - z)·cand + z·h = cand + z·(h - cand)
        h = u.add(cand, u.mul(z, u.sub(h, cand)));
      } else {
        // ONNX's gate order is i, o, f, c.
        Value hr = u.linear(h, rd);
        if (rb)
          hr = u.add(hr, rb);
        Value all = u.add(xt, hr);
        Value i = u.sigmoid(gate(all, 0)), o = u.sigmoid(gate(all, 1)),
              f = u.sigmoid(gate(all, 2)), g = u.tanh(gate(all, 3));
        c = u.add(u.mul(f, c), u.mul(i, g));
        h = u.mul(o, u.tanh(c));
      }
      steps[t] = u.reshape(h, {1, 1, batch, hidden});
    }
    ys.push_back(u.concat(steps, 0));
    lastH.push_back(u.reshape(h, {1, batch, hidden}));
    lastC.push_back(u.reshape(c, {1, batch, hidden}));
  }
  Value y = u.concat(ys, 1);         // [seq, dirs, batch, hidden]
  Value yh = u.concat(lastH, 0);     // [dirs, batch, hidden]
  Value yc = u.concat(lastC, 0);
  if (layout == 1) {
    y = build<TransposeOp>(n, u.typeOf({batch, seq, dirs, hidden}), {y},
                           {arrayAttr(n, "perm", {2, 0, 1, 3})});
    yh = build<TransposeOp>(n, u.typeOf({batch, dirs, hidden}), {yh},
                            {arrayAttr(n, "perm", {1, 0, 2})});
    yc = build<TransposeOp>(n, u.typeOf({batch, dirs, hidden}), {yc},
                            {arrayAttr(n, "perm", {1, 0, 2})});
  }
  if (failed(n.setResult(0, y)) || failed(n.setResult(1, yh)))
    return failure();
  if (cell == Cell::Lstm)
    return n.setResult(2, yc);
  return success();
}

} // namespace

void mlir::fsdp::onnx_ops::addRecurrent(llvm::StringMap<LowerFn> &table) {
  addRows(table,
          {
              {"RNN", [](NodeContext &n) { return lowerRecurrent(n, Cell::Rnn); }},
              {"GRU", [](NodeContext &n) { return lowerRecurrent(n, Cell::Gru); }},
              {"LSTM",
               [](NodeContext &n) { return lowerRecurrent(n, Cell::Lstm); }},
          });
}
