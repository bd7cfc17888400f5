// The CUDA backend's network-level kernels (losses, layouts, convolution,
// pooling, batch norm, AdamW, attention, 16-bit conversions;
// runtime/device/DeviceKernels.h), run on the host, against the CPU
// backend's kernel of the same op on the same random inputs (the
// elementwise, reduction and norm kernels: DeviceKernelsTest.cpp). Both compute element math in float and accumulate in
// double in the same order, so most agree exactly; the tolerance (1e-6
// relative to |value| + 0.1) covers the CPU's float accumulation in the
// reductions over middle axes and libm's last bit.
#include "tests/unit/KernelTestSupport.h"
#include "runtime/plan/OpShapes.h"

#include <cstring>

using namespace kerneltest;

TEST(DeviceKernels, CrossEntropyAndGradientMatchCpu) {
  struct Case {
    const char *reduction;
    LossReduction kind;
    bool weighted, ignore;
    Dims x, t;
  } cases[] = {
      {"mean", LossReduction::Mean, false, true, {6, 5}, {6}},
      {"mean", LossReduction::Mean, true, true, {6, 5}, {6}},
      {"sum", LossReduction::Sum, false, false, {2, 5, 3}, {2, 3}},
      {"none", LossReduction::None, true, true, {2, 5, 3}, {2, 3}},
  };
  // bf16 logits: the device reads them as they are and writes a bf16
  // gradient; the CPU computes on an f32 copy and rounds its result. The
  // same double sums and one rounding: equal.
  for (bool narrow : {false, true})
    for (const Case &k : cases) {
      Arena a;
      int64_t classes = k.x[1], inner = k.x.size() == 3 ? k.x[2] : 1;
      int64_t positions = k.x[0] * inner;
      TensorRef x = a.add(k.x), t = a.add(k.t, DType::I64),
                w = a.add({classes}),
                loss = a.add(k.kind == LossReduction::None ? k.t : Dims{}),
                g = a.add(k.kind == LossReduction::None ? k.t : Dims{}),
                dx = a.add(k.x);
      a.fill(x, -3.0f, 3.0f);
      std::vector<uint16_t> xb(x.numel()), gradb(dx.numel());
      for (int64_t i = 0; i < x.numel(); ++i) {
        xb[i] = toBf16(a.at<float>(x)[i]);
        if (narrow)
          a.at<float>(x)[i] = fromBf16(xb[i]);
      }
      a.fill(w, 0.5f, 2.0f);
      a.fill(g, 0.5f, 1.5f);
      a.fillInts(t, {4, 0, 2, 1, 3, 2});
      nlohmann::json attrs = {{"reduction", k.reduction}};
      if (k.ignore)
        attrs["ignore_index"] = 2;
      LossLayout layout{classes,  inner, true,
                        k.ignore, 2,     k.weighted ? a.at<float>(w) : nullptr};
      if (narrow)
        layout.type = ElemType::BF16;
      const void *xs = narrow ? (const void *)xb.data() : a.at<float>(x);
      std::vector<double> terms(positions), weights(positions);
      std::vector<float> got(loss.numel()), grad(dx.numel());
      double total = 0;
      int error = 0;
      runHost(positions, LossTerms{layout, xs, a.at<int64_t>(t), terms.data(),
                                   weights.data(), &error});
      runHost(1, LossReduce{k.kind, positions, terms.data(), weights.data(),
                            got.data(), &total});
      runHost(positions, LossGradRows{layout, k.kind, xs, a.at<float>(g),
                                      a.at<int64_t>(t), &total,
                                      narrow ? (void *)gradb.data()
                                             : (void *)grad.data()});
      if (narrow)
        for (int64_t i = 0; i < dx.numel(); ++i)
          grad[i] = fromBf16(gradb[i]);
      EXPECT_EQ(error, 0);
      std::vector<TensorRef> ins = {x, t}, gradIns = {x, t, g};
      if (k.weighted) {
        ins.push_back(w);
        gradIns.push_back(w);
      }
      runCpu(a, instr("cross_entropy", ins, {loss}, attrs));
      runCpu(a, instr("cross_entropy_grad", gradIns, {dx}, attrs));
      std::string what =
          std::string(narrow ? "bf16 " : "") + "cross_entropy " + k.reduction;
      if (narrow)
        for (int64_t i = 0; i < dx.numel(); ++i)
          a.at<float>(dx)[i] = fromBf16(toBf16(a.at<float>(dx)[i]));
      expectClose(a.at<float>(loss), got.data(), loss.numel(), what);
      expectClose(a.at<float>(dx), grad.data(), dx.numel(), what + " gradient");
      if (k.kind == LossReduction::None)
        continue;
      // The fused loss and gradient (fsdp-fuse-loss-grad) equal the pair:
      // the same log-sum-exps, summed the same way. Its outputs start
      // poisoned, so an element or a loss it does not write shows.
      TensorRef fusedLoss = a.add({}), fusedDx = a.add(k.x);
      a.fill(fusedLoss, 1e30f, 1e30f);
      a.fill(fusedDx, 1e30f, 1e30f);
      runCpu(a, instr("cross_entropy_with_grad", gradIns, {fusedLoss, fusedDx},
                      attrs));
      if (narrow)
        for (int64_t i = 0; i < dx.numel(); ++i)
          a.at<float>(fusedDx)[i] = fromBf16(toBf16(a.at<float>(fusedDx)[i]));
      expectClose(a.at<float>(loss), a.at<float>(fusedLoss), 1,
                  what + " fused");
      expectClose(a.at<float>(dx), a.at<float>(fusedDx), dx.numel(),
                  what + " fused gradient");
    }
}

TEST(DeviceKernels, TransposeMatchesCpu) {
  Arena a;
  Dims in = {2, 3, 4}, perm = {2, 0, 1};
  TensorRef x = a.add(in), y = a.add({4, 2, 3});
  a.fill(x, -1.0f, 1.0f);
  StridedCopy f{{}, 4, 0, 0, a.at<uint8_t>(x), nullptr};
  ASSERT_TRUE(transposeIndex(in, perm, f.index));
  Dims dst = contiguousStrides(y.shape);
  for (size_t d = 0; d < dst.size(); ++d)
    f.index.strides[1][d] = dst[d];
  std::vector<float> got(y.numel());
  f.y = reinterpret_cast<uint8_t *>(got.data());
  runOnHost(y.numel(), f);
  runCpu(a, instr("transpose", {x}, {y}, {{"perm", perm}}));
  expectClose(a.at<float>(y), got.data(), y.numel(), "transpose");
}

// Convolutions as lowered (im2col, a GEMM per group batched over the
// images, col2im) against the CPU kernels (image by image): 2-D with
// padding, stride and bias; groups with dilation and unequal pads; 1-D.
// The GEMMs sum in another order, so the tolerance is 1e-5.
TEST(DeviceKernels, ConvolutionsMatchCpu) {
  struct Case {
    Dims x, w, y;
    nlohmann::json attrs;
    bool bias;
  };
  std::vector<Case> cases = {
      {{2, 3, 6, 5},
       {4, 3, 3, 3},
       {2, 4, 3, 3},
       {{"strides", {2, 2}},
        {"pads", {1, 1, 1, 1}},
        {"dilations", {1, 1}},
        {"groups", 1}},
       true},
      {{3, 4, 7, 6},
       {6, 2, 2, 3},
       {3, 6, 6, 2},
       {{"strides", {1, 2}},
        {"pads", {1, 0, 0, 1}},
        {"dilations", {2, 2}},
        {"groups", 2}},
       false},
      {{2, 3, 7},
       {3, 1, 4},
       {2, 3, 4},
       {{"strides", {2}}, {"pads", {1, 2}}, {"dilations", {1}}, {"groups", 3}},
       true}};
  for (const Case &k : cases) {
    Arena a;
    TensorRef x = a.add(k.x), w = a.add(k.w), b = a.add({k.w[0]}),
              dy = a.add(k.y), y = a.add(k.y), gotY = a.add(k.y),
              dx = a.add(k.x), gotDx = a.add(k.x), dw = a.add(k.w),
              gotDw = a.add(k.w);
    a.fill(x, -1.0f, 1.0f);
    a.fill(w, -1.0f, 1.0f);
    a.fill(b, -1.0f, 1.0f);
    a.fill(dy, -1.0f, 1.0f);
    std::vector<TensorRef> in = {x, w};
    if (k.bias)
      in.push_back(b);
    runCpu(a, instr("conv", in, {y}, k.attrs));
    runLowered(a, instr("conv", in, {gotY}, k.attrs));
    expectClose(a.at<float>(y), a.at<float>(gotY), y.numel(), "conv", 1e-5f);
    runCpu(a, instr("conv_grad_input", {dy, w}, {dx}, k.attrs));
    runLowered(a, instr("conv_grad_input", {dy, w}, {gotDx}, k.attrs));
    expectClose(a.at<float>(dx), a.at<float>(gotDx), dx.numel(),
                "conv_grad_input", 1e-5f);
    runCpu(a, instr("conv_grad_weight", {x, dy}, {dw}, k.attrs));
    runLowered(a, instr("conv_grad_weight", {x, dy}, {gotDw}, k.attrs));
    expectClose(a.at<float>(dw), a.at<float>(gotDw), dw.numel(),
                "conv_grad_weight", 1e-5f);
  }
}

// Pools as lowered against the CPU kernels, forward and input gradient:
// max with padding and strides, average with ceil_mode excluding padding,
// average including it, 1-D max with dilation. Same float steps: exact.
TEST(DeviceKernels, PoolsMatchCpu) {
  struct Case {
    Dims x, y;
    nlohmann::json attrs;
  };
  std::vector<Case> cases = {{{2, 3, 7, 6},
                              {2, 3, 4, 3},
                              {{"mode", "max"},
                               {"kernel", {3, 3}},
                               {"strides", {2, 2}},
                               {"pads", {1, 1, 1, 1}},
                               {"dilations", {1, 1}}}},
                             {{1, 2, 5, 5},
                              {1, 2, 3, 3},
                              {{"mode", "avg"},
                               {"kernel", {2, 2}},
                               {"strides", {2, 2}},
                               {"pads", {1, 1, 1, 1}},
                               {"dilations", {1, 1}},
                               {"ceil_mode", true}}},
                             {{1, 2, 5, 4},
                              {1, 2, 5, 4},
                              {{"mode", "avg"},
                               {"kernel", {3, 3}},
                               {"strides", {1, 1}},
                               {"pads", {1, 1, 1, 1}},
                               {"dilations", {1, 1}},
                               {"count_include_pad", true}}},
                             {{2, 2, 9},
                              {2, 2, 5},
                              {{"mode", "max"},
                               {"kernel", {3}},
                               {"strides", {1}},
                               {"pads", {0, 0}},
                               {"dilations", {2}}}}};
  for (const Case &k : cases) {
    Arena a;
    TensorRef x = a.add(k.x), y = a.add(k.y), gotY = a.add(k.y),
              dy = a.add(k.y), dx = a.add(k.x), gotDx = a.add(k.x);
    a.fill(x, -1.0f, 1.0f);
    a.fill(dy, -1.0f, 1.0f);
    runCpu(a, instr("pool", {x}, {y}, k.attrs));
    runLowered(a, instr("pool", {x}, {gotY}, k.attrs));
    expectClose(a.at<float>(y), a.at<float>(gotY), y.numel(), "pool");
    runCpu(a, instr("pool_grad", {x, dy}, {dx}, k.attrs));
    runLowered(a, instr("pool_grad", {x, dy}, {gotDx}, k.attrs));
    expectClose(a.at<float>(dx), a.at<float>(gotDx), dx.numel(), "pool_grad");
  }
}

// Batch norm, forward (y, batch mean and variance) and backward, as
// lowered against the CPU kernels: one set of float steps, so exact. And
// synchronised (SyncBatchNorm's steps, on one rank: the all-reduces sum
// one slice), lowered against the CPU, and both against the unsynchronised
// results (the same statistics, its per-channel sums rounded to f32).
TEST(DeviceKernels, BatchNormMatchesCpu) {
  for (Dims shape : {Dims{4, 3, 5, 2}, Dims{6, 5}}) {
    Arena a;
    Dims ch = {shape[1]};
    TensorRef x = a.add(shape), w = a.add(ch), b = a.add(ch), dy = a.add(shape);
    TensorRef outs[4][6];
    for (auto &o : outs)
      o[0] = a.add(shape), o[1] = a.add(ch), o[2] = a.add(ch),
      o[3] = a.add(shape), o[4] = a.add(ch), o[5] = a.add(ch);
    a.fill(x, -2.0f, 3.0f);
    a.fill(w, 0.5f, 1.5f);
    a.fill(b, -1.0f, 1.0f);
    a.fill(dy, -1.0f, 1.0f);
    for (int k = 0; k < 4; ++k) {
      nlohmann::json attrs = {{"epsilon", 1e-5}};
      if (k >= 2)
        attrs["sync_group_size"] = 1;
      const TensorRef *o = outs[k];
      Instruction fwd =
                      instr("batch_norm", {x, w, b}, {o[0], o[1], o[2]}, attrs),
                  bwd = instr("batch_norm_grad", {x, w, dy}, {o[3], o[4], o[5]},
                              attrs);
      if (k % 2 == 0) {
        runCpu(a, fwd);
        runCpu(a, bwd);
      } else {
        runLowered(a, fwd);
        runLowered(a, bwd);
      }
    }
    const char *what[6] = {"y", "mean", "var", "dx", "dscale", "dbias"};
    for (int k : {1, 2, 3})
      for (int i = 0; i < 6; ++i)
        expectClose(a.at<float>(outs[0][i]), a.at<float>(outs[k][i]),
                    outs[0][i].numel(), what[i]);
  }
}

TEST(DeviceKernels, AdamWMatchesCpuOverSteps) {
  Arena a;
  TensorRef g = a.add({37});
  std::vector<float> cpuParam(37), devParam(37), m(37, 0.0f), v(37, 0.0f);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int i = 0; i < 37; ++i)
    cpuParam[i] = devParam[i] = u(rng);
  cpu::OptimizerState opt;
  opt.first = {std::vector<float>(37, 0.0f)};
  opt.second = {std::vector<float>(37, 0.0f)};
  float lr = 1e-2f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f;
  for (int64_t step = 1; step <= 3; ++step) {
    a.fill(g, -1.0f, 1.0f);
    opt.step = step;
    runCpu(a,
           instr("adamw", {g}, {},
                 {{"param", 0},
                  {"lr", lr},
                  {"beta1", b1},
                  {"beta2", b2},
                  {"eps", eps},
                  {"weight_decay", wd}}),
           &opt, {cpuParam.data()});
    double scalars[device::kStepScalars] = {1.0, (double)step, (double)step};
    float sched[4];
    runOnHost(1, AdamWSchedule{lr, b1, b2, scalars, sched});
    runOnHost(37, AdamW{b1, b2, eps, wd, sched, nullptr, a.at<float>(g),
                        devParam.data(), m.data(), v.data()});
  }
  expectClose(cpuParam.data(), devParam.data(), 37, "adamw parameters");
  expectClose(opt.first[0].data(), m.data(), 37, "adamw first moment");
  expectClose(opt.second[0].data(), v.data(), 37, "adamw second moment");
}

/// The device kernels' layout of attention over [batch, tq, tk] with a
/// dense [batch, tq, tk] mask, boolean or additive.
static AttentionLayout denseMaskLayout(int64_t batch, int64_t tq, int64_t tk,
                                       int64_t d, int64_t dv, float scale,
                                       const float *q, const float *k,
                                       const float *v, const uint8_t *mask,
                                       bool additive) {
  AttentionLayout layout{tq, tk, d, dv, scale, false, q, k, v};
  AttentionMask &m = layout.mask;
  (additive ? (const void *&)m.add : (const void *&)m.keep) = mask;
  m.batchRank = 1;
  m.batchDims[0] = batch;
  m.batchStrides[0] = tq * tk;
  m.rowStride = tk;
  m.colStride = 1;
  return layout;
}

/// The device kernels' attention and its gradient, run on the host.
static void runAttentionOnHost(const AttentionLayout &layout, int64_t batch,
                               const float *dy, std::vector<float> &y,
                               std::vector<float> &dq, std::vector<float> &dk,
                               std::vector<float> &dv,
                               std::vector<float> *lse = nullptr) {
  y.assign(batch * layout.tq * layout.dv, 0.0f);
  dq.assign(batch * layout.tq * layout.d, 0.0f);
  dk.assign(batch * layout.tk * layout.d, 0.0f);
  dv.assign(batch * layout.tk * layout.dv, 0.0f);
  if (lse)
    lse->assign(batch * layout.tq, 0.0f);
  std::vector<double> stats(3 * batch * layout.tq);
  runOnHost(batch * layout.tq,
            AttentionRows{layout, y.data(), lse ? lse->data() : nullptr});
  runOnHost(batch * layout.tq,
            AttentionGradQueryRows{layout, dy, dq.data(), stats.data()});
  runOnHost(batch * layout.tk, AttentionGradKeyRows{layout, dy, stats.data(),
                                                    dk.data(), dv.data()});
}

// Attention sums its dot products in a different order than OpenBLAS's
// sgemm (and sums dk, dv over query rows in row order), so it agrees to float
// rounding over the sums' lengths: 1e-5 relative. Beyond 64 query rows the
// CPU's causal attention works in blocks of 64 rows that stop at the
// diagonal (dk, dv summed over the blocks): 150 and 130 rows cover a
// partial last block, the latter with tk > tq.
TEST(DeviceKernels, AttentionAndGradientMatchCpu) {
  const std::pair<int64_t, int64_t> shapes[] = {
      {6, 6},
      {4, 6},
      {150, 150},
      {130, 200}}; // tq < tk: rows offset by tk - tq
  for (bool causal : {false, true})
    for (auto [tq, tk] : shapes) {
      Arena a;
      int64_t batch = 3, d = 8, dv = 5;
      float scale = 0.35f;
      TensorRef q = a.add({batch, tq, d}), k = a.add({batch, tk, d}),
                v = a.add({batch, tk, dv}), y = a.add({batch, tq, dv}),
                dy = a.add({batch, tq, dv}), dq = a.add({batch, tq, d}),
                dk = a.add({batch, tk, d}), dvv = a.add({batch, tk, dv}),
                lse = a.add({batch, tq});
      for (const TensorRef &t : {q, k, v, dy})
        a.fill(t, -1.5f, 1.5f);
      AttentionLayout layout{tq,
                             tk,
                             d,
                             dv,
                             scale,
                             causal,
                             a.at<float>(q),
                             a.at<float>(k),
                             a.at<float>(v)};
      std::vector<float> got, gq, gk, gv, glse;
      runAttentionOnHost(layout, batch, a.at<float>(dy), got, gq, gk, gv,
                         &glse);
      nlohmann::json attrs = {{"scale", scale}, {"causal", causal}};
      // A training step's forms: the forward keeps its rows' log-sum-exp
      // (with_lse), the backward takes it and the output (saved).
      runCpu(a, instr("attention", {q, k, v}, {y, lse}, attrs));
      runCpu(a, instr("attention_grad", {q, k, v, dy, y, lse}, {dq, dk, dvv},
                      attrs));
      std::string what = std::string(causal ? "causal " : "") + "attention";
      expectClose(a.at<float>(y), got.data(), y.numel(), what, 1e-5f);
      expectClose(a.at<float>(lse), glse.data(), lse.numel(), what + " lse",
                  1e-5f);
      // The log-sum-exp itself, from its definition, for row 0 of batch 0.
      {
        double mx = -INFINITY, sum = 0;
        std::vector<double> sc;
        for (int64_t j = 0; j < tk; ++j) {
          if (causal && j > (tk - tq))
            break;
          double s = 0;
          for (int64_t t = 0; t < d; ++t)
            s += (double)a.at<float>(q)[t] * a.at<float>(k)[j * d + t];
          sc.push_back(scale * s);
          mx = std::max(mx, sc.back());
        }
        for (double s : sc)
          sum += std::exp(s - mx);
        EXPECT_NEAR(a.at<float>(lse)[0], mx + std::log(sum), 1e-5) << what;
      }
      expectClose(a.at<float>(dq), gq.data(), dq.numel(), what + " dq", 1e-5f);
      expectClose(a.at<float>(dk), gk.data(), dk.numel(), what + " dk", 1e-5f);
      expectClose(a.at<float>(dvv), gv.data(), dvv.numel(), what + " dv",
                  1e-5f);
    }
}

// A query whose every key is masked (a padded batch's rows under left
// padding or a sliding window): with safe_softmax both backends give it a
// zero output and send nothing back through it, as PyTorch's
// scaled_dot_product_attention does; without it, NaN, as a softmax gives.
// The mask is boolean and additive (-inf) in turn; rows 1 and 4 of each
// batch element are empty, the others keep 1..tk keys.
TEST(DeviceKernels, AttentionSafeSoftmaxZeroesEmptyRows) {
  int64_t batch = 2, tq = 6, tk = 5, d = 4, dv = 3;
  for (bool additive : {false, true})
    for (bool safe : {true, false}) {
      Arena a;
      TensorRef q = a.add({batch, tq, d}), k = a.add({batch, tk, d}),
                v = a.add({batch, tk, dv}), y = a.add({batch, tq, dv}),
                dy = a.add({batch, tq, dv}), dq = a.add({batch, tq, d}),
                dk = a.add({batch, tk, d}), dvv = a.add({batch, tk, dv}),
                mask = a.add({batch, tq, tk}, additive ? DType::F32 : DType::I1);
      for (const TensorRef &t : {q, k, v, dy})
        a.fill(t, -1.5f, 1.5f);
      auto empty = [](int64_t i) { return i == 1 || i == 4; };
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t i = 0; i < tq; ++i)
          for (int64_t j = 0; j < tk; ++j) {
            bool keep = !empty(i) && j <= (i + b) % tk;
            int64_t at = (b * tq + i) * tk + j;
            if (additive)
              a.at<float>(mask)[at] = keep ? 0.25f * j : -INFINITY;
            else
              a.at<uint8_t>(mask)[at] = keep;
          }
      AttentionLayout layout = denseMaskLayout(
          batch, tq, tk, d, dv, 0.5f, a.at<float>(q), a.at<float>(k),
          a.at<float>(v), a.at<uint8_t>(mask), additive);
      layout.safe = safe;
      std::vector<float> got, gq, gk, gv;
      runAttentionOnHost(layout, batch, a.at<float>(dy), got, gq, gk, gv);
      nlohmann::json attrs = {{"scale", 0.5}, {"safe_softmax", safe}};
      runCpu(a, instr("attention", {q, k, v, mask}, {y}, attrs));
      runCpu(a, instr("attention_grad", {q, k, v, dy, mask}, {dq, dk, dvv},
                      attrs));
      std::string what = std::string(additive ? "additive" : "boolean") +
                         (safe ? " mask, safe softmax" : " mask");
      for (int64_t r = 0; r < batch * tq; ++r)
        for (int64_t c = 0; c < dv; ++c) {
          float cpu = a.at<float>(y)[r * dv + c], dev = got[r * dv + c];
          if (!empty(r % tq))
            continue;
          if (safe) {
            EXPECT_EQ(cpu, 0.0f) << what << ", row " << r;
            EXPECT_EQ(dev, 0.0f) << what << ", row " << r;
          } else {
            EXPECT_TRUE(std::isnan(cpu)) << what << ", row " << r;
            EXPECT_TRUE(std::isnan(dev)) << what << ", row " << r;
          }
        }
      if (!safe)
        continue;
      for (int64_t r = 0; r < batch * tq; ++r)
        for (int64_t t = 0; t < d; ++t)
          if (empty(r % tq)) {
            EXPECT_EQ(a.at<float>(dq)[r * d + t], 0.0f) << what << ", row " << r;
          }
      expectClose(a.at<float>(y), got.data(), y.numel(), what, 1e-5f);
      expectClose(a.at<float>(dq), gq.data(), dq.numel(), what + " dq", 1e-5f);
      expectClose(a.at<float>(dk), gk.data(), dk.numel(), what + " dk", 1e-5f);
      expectClose(a.at<float>(dvv), gv.data(), dvv.numel(), what + " dv",
                  1e-5f);
      for (float g : gk)
        ASSERT_TRUE(std::isfinite(g)) << what << " dk";
    }
}

// A query whose every key a boolean mask hides, under average_empty_rows:
// what masked_fill(~keep, -1e9) → softmax → ·v gives in PyTorch. The row's
// scores are all the fill, so its output is the mean of the values, its
// values get dy/tk each, and q and k get nothing through the hidden scores
// (masked_fill passes no gradient there). Both backends against that
// composition, written out in double; rows 1 and 4 are empty.
TEST(DeviceKernels, AttentionAverageEmptyRowsIsMaskedFill) {
  int64_t batch = 2, tq = 6, tk = 5, d = 4, dv = 3;
  const float scale = 0.5f;
  Arena a;
  TensorRef q = a.add({batch, tq, d}), k = a.add({batch, tk, d}),
            v = a.add({batch, tk, dv}), y = a.add({batch, tq, dv}),
            dy = a.add({batch, tq, dv}), dq = a.add({batch, tq, d}),
            dk = a.add({batch, tk, d}), dvv = a.add({batch, tk, dv}),
            mask = a.add({batch, tq, tk}, DType::I1);
  for (const TensorRef &t : {q, k, v, dy})
    a.fill(t, -1.5f, 1.5f);
  auto empty = [](int64_t i) { return i == 1 || i == 4; };
  auto keep = [&](int64_t b, int64_t i, int64_t j) {
    return !empty(i) && j <= (i + b) % tk;
  };
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < tq; ++i)
      for (int64_t j = 0; j < tk; ++j)
        a.at<uint8_t>(mask)[(b * tq + i) * tk + j] = keep(b, i, j);
  // The composition, in double.
  const float *pq = a.at<float>(q), *pk = a.at<float>(k),
              *pv = a.at<float>(v), *pdy = a.at<float>(dy);
  std::vector<double> wy(y.numel()), wq(dq.numel()), wk(dk.numel()),
      wv(dvv.numel());
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < tq; ++i) {
      std::vector<double> s(tk), p(tk), dp(tk);
      for (int64_t j = 0; j < tk; ++j) {
        double dot = 0;
        for (int64_t t = 0; t < d; ++t)
          dot += (double)pq[(b * tq + i) * d + t] * pk[(b * tk + j) * d + t];
        s[j] = keep(b, i, j) ? scale * dot : -1e9;
      }
      double mx = *std::max_element(s.begin(), s.end()), sum = 0, pdp = 0;
      for (int64_t j = 0; j < tk; ++j)
        sum += p[j] = std::exp(s[j] - mx);
      for (int64_t j = 0; j < tk; ++j) {
        p[j] /= sum;
        for (int64_t c = 0; c < dv; ++c) {
          wy[(b * tq + i) * dv + c] += p[j] * pv[(b * tk + j) * dv + c];
          wv[(b * tk + j) * dv + c] += p[j] * pdy[(b * tq + i) * dv + c];
          dp[j] += (double)pdy[(b * tq + i) * dv + c] * pv[(b * tk + j) * dv + c];
        }
        pdp += p[j] * dp[j];
      }
      for (int64_t j = 0; j < tk; ++j) {
        double ds = keep(b, i, j) ? p[j] * (dp[j] - pdp) : 0.0;
        for (int64_t t = 0; t < d; ++t) {
          wq[(b * tq + i) * d + t] += scale * ds * pk[(b * tk + j) * d + t];
          wk[(b * tk + j) * d + t] += scale * ds * pq[(b * tq + i) * d + t];
        }
      }
    }
  auto near = [](const std::vector<double> &want, const float *got,
                 const std::string &what) {
    for (size_t n = 0; n < want.size(); ++n)
      ASSERT_NEAR(got[n], want[n], 1e-5) << what << " [" << n << "]";
  };
  AttentionLayout layout = denseMaskLayout(batch, tq, tk, d, dv, scale, pq, pk,
                                           pv, a.at<uint8_t>(mask), false);
  layout.average = true;
  std::vector<float> got, gq, gk, gv;
  runAttentionOnHost(layout, batch, pdy, got, gq, gk, gv);
  near(wy, got.data(), "device y");
  near(wq, gq.data(), "device dq");
  near(wk, gk.data(), "device dk");
  near(wv, gv.data(), "device dv");
  nlohmann::json attrs = {{"scale", scale}, {"average_empty_rows", true}};
  runCpu(a, instr("attention", {q, k, v, mask}, {y}, attrs));
  runCpu(a, instr("attention_grad", {q, k, v, dy, mask}, {dq, dk, dvv}, attrs));
  near(wy, a.at<float>(y), "cpu y");
  near(wq, a.at<float>(dq), "cpu dq");
  near(wk, a.at<float>(dk), "cpu dk");
  near(wv, a.at<float>(dvv), "cpu dv");
}

// Flash attention (runtime/device/FlashAttention.h: tiles of 64 rows,
// tensor-core products emulated on the host) on bf16 and f16 q, k, v,
// against the CPU's attention on the same values widened to f32. The flash
// kernels round probabilities and score gradients to 16 bits before their
// products, as FlashAttention does: an output moves by at most 2^-9 (bf16)
// of the largest value it sums, then by its own rounding. 1e-2 of the
// tensor's largest |value| (2.5 bf16 roundings) covers that; a wrong mask,
// tile edge or index moves outputs by the order of the values themselves.
// The shapes cover partial tiles of queries and keys, tq < tk with and
// without a causal mask, and head sizes 16 to 128.
TEST(DeviceKernels, FlashAttentionMatchesCpu) {
  struct Case {
    int64_t batch, tq, tk, d;
    bool causal;
  };
  const Case cases[] = {{2, 80, 80, 32, true},    {2, 80, 80, 32, false},
                        {1, 48, 112, 16, true},   {3, 64, 64, 64, true},
                        {1, 130, 130, 128, true}, {1, 20, 150, 16, false}};
  for (bool f16 : {false, true})
    for (const Case &t : cases) {
      Arena a;
      TensorRef q = a.add({t.batch, t.tq, t.d}),
                k = a.add({t.batch, t.tk, t.d}),
                v = a.add({t.batch, t.tk, t.d}),
                y = a.add({t.batch, t.tq, t.d}),
                dy = a.add({t.batch, t.tq, t.d}),
                dq = a.add({t.batch, t.tq, t.d}),
                dk = a.add({t.batch, t.tk, t.d}),
                dv = a.add({t.batch, t.tk, t.d}), lse = a.add({t.batch, t.tq});
      auto narrow = [&](const TensorRef &r) {
        a.fill(r, -1.5f, 1.5f);
        std::vector<uint16_t> n(r.numel());
        for (int64_t i = 0; i < r.numel(); ++i) {
          n[i] = floatToNarrow(f16, a.at<float>(r)[i]);
          a.at<float>(r)[i] = narrowToFloat(f16, n[i]);
        }
        return n;
      };
      std::vector<uint16_t> qn = narrow(q), kn = narrow(k), vn = narrow(v),
                            dyn = narrow(dy);
      float scale = 1.5f / std::sqrt((float)t.d);
      FlashLayout f;
      f.tq = t.tq;
      f.tk = t.tk;
      f.d = t.d;
      f.scale = scale;
      f.causal = t.causal;
      f.f16 = f16;
      f.q = qn.data();
      f.k = kn.data();
      f.v = vn.data();
      std::vector<uint16_t> yn(y.numel()), dqn(dq.numel()), dkn(dk.numel()),
          dvn(dv.numel());
      std::vector<float> stats(3 * t.batch * t.tq), lsen(t.batch * t.tq);
      std::vector<double> smem;
      runBlocksOnHost(t.batch * f.tiles(t.tq),
                      FlashAttention{f, yn.data(), lsen.data()}, smem);
      runBlocksOnHost(
          t.batch * f.tiles(t.tq),
          FlashAttentionGradQueries{f, dyn.data(), dqn.data(), stats.data()},
          smem);
      runBlocksOnHost(t.batch * f.tiles(t.tk),
                      FlashAttentionGradKeys{f, dyn.data(), stats.data(),
                                             dkn.data(), dvn.data()},
                      smem);
      nlohmann::json attrs = {{"scale", scale}, {"causal", t.causal}};
      runCpu(a, instr("attention", {q, k, v}, {y, lse}, attrs));
      runCpu(a, instr("attention_grad", {q, k, v, dy}, {dq, dk, dv}, attrs));
      // The row log-sum-exp: f32 sums of the same exact products.
      for (int64_t i = 0; i < lse.numel(); ++i)
        ASSERT_NEAR(a.at<float>(lse)[i], lsen[i],
                    1e-4f * (1 + std::fabs(a.at<float>(lse)[i])))
            << "lse row " << i << " (" << (f16 ? "f16" : "bf16") << ", tq "
            << t.tq << ", tk " << t.tk << ", d " << t.d
            << (t.causal ? ", causal" : "") << ")";
      auto check = [&](const TensorRef &want, const std::vector<uint16_t> &got,
                       const char *name) {
        const float *w = a.at<float>(want);
        float most = 0;
        for (int64_t i = 0; i < want.numel(); ++i)
          most = std::max(most, std::fabs(w[i]));
        for (int64_t i = 0; i < want.numel(); ++i)
          ASSERT_NEAR(w[i], narrowToFloat(f16, got[i]), 1e-2f * most)
              << name << " element " << i << " (" << (f16 ? "f16" : "bf16")
              << ", batch " << t.batch << ", tq " << t.tq << ", tk " << t.tk
              << ", d " << t.d << (t.causal ? ", causal" : "") << ")";
      };
      check(y, yn, "y");
      check(dq, dqn, "dq");
      check(dk, dkn, "dk");
      check(dv, dvn, "dv");
    }
}

// The device's 16-bit conversions against the host's (runtime/support/
// Half.h): every 16-bit pattern back to float, and floats around every
// rounding boundary, subnormals, overflow and NaN to 16 bits.
TEST(DeviceKernels, SixteenBitConversionsMatchHost) {
  for (uint32_t h = 0; h < 65536; ++h) {
    float a = floatFromF16((uint16_t)h), b = fromF16((uint16_t)h);
    if (std::isnan(a)) {
      EXPECT_TRUE(std::isnan(b)) << h;
      continue;
    }
    ASSERT_EQ(floatToBits(a), floatToBits(b)) << "f16 " << h;
    ASSERT_EQ(floatToBits(floatFromBf16((uint16_t)h)),
              floatToBits(fromBf16((uint16_t)h)))
        << "bf16 " << h;
  }
  std::mt19937 rng(3);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 2000000; ++i) {
    uint32_t x = bits(rng);
    if (i % 2) // half of them near f16's range, where the cases are
      x = (x & 0x80000000u) | (0x33000000u + x % (0x47800000u - 0x33000000u));
    float f = bitsToFloat(x);
    ASSERT_EQ(f16FromFloat(f), toF16(f)) << std::hex << x;
    ASSERT_EQ(bf16FromFloat(f), toBf16(f)) << std::hex << x;
  }
}

// The "bshd" layout (fsdp-attention-layout: q, k, v, the output and the
// gradients [B, T, H, D], no transposes around attention) computes what
// the "bhsd" layout computes on the transposed tensors, bit for bit: the
// same sums in the same order, only read through another row stride. On
// the CPU kernels and on the device lowering run on the host, in f32 (the
// simple kernels) and bf16 (the flash kernels cuDNN falls back to), with
// the forward's lse and the backward's saved operands as a training step
// has them.
TEST(DeviceKernels, AttentionBshdLayoutIsBhsdTransposed) {
  const int64_t B = 2, T = 80, H = 3, D = 32;
  for (DType dtype : {DType::F32, DType::BF16})
    for (bool causal : {false, true})
      for (bool device : {false, true}) {
        if (dtype == DType::BF16 && !device)
          continue; // the CPU widens bf16 to f32: the f32 case
        Arena a;
        std::vector<TensorRef> s, h; // q k v dy y dq dk dv: bshd, bhsd
        for (int i = 0; i < 8; ++i) {
          s.push_back(a.add({B, T, H, D}, dtype));
          h.push_back(a.add({B, H, T, D}, dtype));
        }
        TensorRef lseS = a.add({B, H, T}), lseH = a.add({B, H, T});
        auto index = [&](bool bshd, int64_t b, int64_t t, int64_t hh,
                         int64_t e) {
          return bshd ? ((b * T + t) * H + hh) * D + e
                      : ((b * H + hh) * T + t) * D + e;
        };
        std::mt19937 rng(11);
        std::uniform_real_distribution<float> u(-1.5f, 1.5f);
        for (int i = 0; i < 4; ++i) // q, k, v, dy: the same values
          for (int64_t b = 0; b < B; ++b)
            for (int64_t t = 0; t < T; ++t)
              for (int64_t hh = 0; hh < H; ++hh)
                for (int64_t e = 0; e < D; ++e) {
                  float x = u(rng);
                  if (dtype == DType::F32) {
                    a.at<float>(s[i])[index(true, b, t, hh, e)] = x;
                    a.at<float>(h[i])[index(false, b, t, hh, e)] = x;
                  } else {
                    a.at<uint16_t>(s[i])[index(true, b, t, hh, e)] = toBf16(x);
                    a.at<uint16_t>(h[i])[index(false, b, t, hh, e)] =
                        toBf16(x);
                  }
                }
        for (bool bshd : {true, false}) {
          const std::vector<TensorRef> &t = bshd ? s : h;
          const TensorRef &lse = bshd ? lseS : lseH;
          nlohmann::json attrs = {{"scale", 0.2}, {"causal", causal}};
          if (bshd)
            attrs["layout"] = "bshd";
          Instruction fwd = instr("attention", {t[0], t[1], t[2]}, {t[4], lse},
                                  attrs),
                      bwd = instr("attention_grad",
                                  {t[0], t[1], t[2], t[3], t[4], lse},
                                  {t[5], t[6], t[7]}, attrs);
          if (device) {
            runLowered(a, fwd);
            runLowered(a, bwd);
          } else {
            runCpu(a, fwd);
            runCpu(a, bwd);
          }
        }
        const char *what[] = {"", "", "", "", "y", "dq", "dk", "dv"};
        size_t bytes = dtype == DType::F32 ? 4 : 2;
        for (int i = 4; i < 8; ++i)
          for (int64_t b = 0; b < B; ++b)
            for (int64_t tt = 0; tt < T; ++tt)
              for (int64_t hh = 0; hh < H; ++hh)
                ASSERT_EQ(std::memcmp(a.base() + s[i].offset +
                                          index(true, b, tt, hh, 0) * bytes,
                                      a.base() + h[i].offset +
                                          index(false, b, tt, hh, 0) * bytes,
                                      D * bytes),
                          0)
                    << what[i] << " of batch " << b << ", row " << tt
                    << ", head " << hh << (device ? " (device" : " (cpu")
                    << (dtype == DType::F32 ? ", f32" : ", bf16")
                    << (causal ? ", causal)" : ")");
        ASSERT_EQ(std::memcmp(a.at<float>(lseS), a.at<float>(lseH),
                              lseS.numel() * 4),
                  0)
            << "lse" << (device ? " (device)" : " (cpu)");
      }
}

// A matmul with lhs_sums (fsdp-fuse-bias-grad: nn.Linear's weight and bias
// gradients from one GEMM) gives, on the CPU and on the device lowering
// run on the host, bit for bit what the matmul and the reduce_sum it
// replaced give: the host has no GEMM epilogue, so the same reduction runs
// after the product (on a GPU, cuBLASLt's BGRADB; tests/e2e/cuda_parity.py).
TEST(DeviceKernels, MatmulLhsSumsIsTheReduction) {
  const int64_t M = 70, N = 24, K = 10;
  for (DType dtype : {DType::F32, DType::BF16})
    for (bool device : {false, true}) {
      Arena a;
      TensorRef dy = a.add({M, N}, dtype), x = a.add({M, K}, dtype),
                dw = a.add({N, K}, dtype), db = a.add({N}, dtype),
                dw2 = a.add({N, K}, dtype), db2 = a.add({1, N}, dtype);
      std::mt19937 rng(5);
      std::uniform_real_distribution<float> u(-2.0f, 2.0f);
      for (const TensorRef &t : {dy, x})
        for (int64_t i = 0; i < t.numel(); ++i) {
          if (dtype == DType::F32)
            a.at<float>(t)[i] = u(rng);
          else
            a.at<uint16_t>(t)[i] = toBf16(u(rng));
        }
      nlohmann::json mm = {{"transpose_lhs", true}};
      nlohmann::json fused = {{"transpose_lhs", true}, {"lhs_sums", true}};
      nlohmann::json sum = {{"axes", {0}}, {"keepdims", true}};
      Instruction one = instr("matmul", {dy, x}, {dw, db}, fused),
                  product = instr("matmul", {dy, x}, {dw2}, mm),
                  reduce = instr("reduce_sum", {dy}, {db2}, sum);
      for (const Instruction &in : {one, product, reduce}) {
        if (device)
          runLowered(a, in);
        else if (dtype == DType::F32)
          runCpu(a, in);
      }
      if (!device && dtype != DType::F32)
        continue; // the CPU widens bf16 around its kernels: the f32 case
      size_t bytes = dtype == DType::F32 ? 4 : 2;
      EXPECT_EQ(std::memcmp(a.base() + dw.offset, a.base() + dw2.offset,
                            dw.numel() * bytes),
                0)
          << "product" << (device ? " (device)" : " (cpu)");
      EXPECT_EQ(std::memcmp(a.base() + db.offset, a.base() + db2.offset,
                            db.numel() * bytes),
                0)
          << "sums" << (device ? " (device)" : " (cpu)");
      // And the sums are the column sums (a wrong axis is not).
      double want = 0;
      for (int64_t i = 0; i < M; ++i)
        want += dtype == DType::F32 ? a.at<float>(dy)[i * N + 3]
                                    : fromBf16(a.at<uint16_t>(dy)[i * N + 3]);
      float got = dtype == DType::F32 ? a.at<float>(db)[3]
                                      : fromBf16(a.at<uint16_t>(db)[3]);
      EXPECT_NEAR(got, want, 1e-4 + 1e-2 * std::fabs(want));
    }
}

// Grouped-query attention (k and v of Hk heads, query head h reading key
// head h / (H / Hk)) against the same attention with k and v repeated to
// H heads (repeat_kv, what fsdp-attention-layout removes): the output, the
// lse and dq bit for bit (the same sums per query head), dk and dv equal
// to the repeated run's gradients summed over each group (another order of
// the same sums), on the CPU and the device lowering run on the host, in
// both layouts, f32 (the rows kernels) and bf16 (the flash kernels).
TEST(DeviceKernels, GroupedQueryAttentionIsRepeatedKeys) {
  const int64_t B = 2, H = 4, HK = 2, T = 80, D = 32, N = H / HK;
  for (DType dtype : {DType::F32, DType::BF16})
    for (bool bshd : {false, true})
      for (bool device : {false, true}) {
        if (dtype == DType::BF16 && !device)
          continue; // the CPU widens bf16 to f32: the f32 case
        Arena a;
        auto dims = [&](int64_t heads) {
          return bshd ? Dims{B, T, heads, D} : Dims{B, heads, T, D};
        };
        // q dy y dq (H heads); k v dk dv (HK); kr vr dkr dvr (H, repeated)
        TensorRef q = a.add(dims(H), dtype), dy = a.add(dims(H), dtype),
                  y = a.add(dims(H), dtype), dq = a.add(dims(H), dtype),
                  k = a.add(dims(HK), dtype), v = a.add(dims(HK), dtype),
                  dk = a.add(dims(HK), dtype), dv = a.add(dims(HK), dtype),
                  kr = a.add(dims(H), dtype), vr = a.add(dims(H), dtype),
                  yr = a.add(dims(H), dtype), dqr = a.add(dims(H), dtype),
                  dkr = a.add(dims(H), dtype), dvr = a.add(dims(H), dtype),
                  lse = a.add({B, H, T}), lser = a.add({B, H, T});
        auto at = [&](int64_t heads, int64_t b, int64_t t, int64_t h,
                      int64_t e) {
          return bshd ? ((b * T + t) * heads + h) * D + e
                      : ((b * heads + h) * T + t) * D + e;
        };
        auto get = [&](const TensorRef &r, int64_t i) {
          return dtype == DType::F32 ? a.at<float>(r)[i]
                                     : fromBf16(a.at<uint16_t>(r)[i]);
        };
        auto set = [&](const TensorRef &r, int64_t i, float x) {
          if (dtype == DType::F32)
            a.at<float>(r)[i] = x;
          else
            a.at<uint16_t>(r)[i] = toBf16(x);
        };
        std::mt19937 rng(17);
        std::uniform_real_distribution<float> u(-1.5f, 1.5f);
        for (const TensorRef &r : {q, dy})
          for (int64_t i = 0; i < r.numel(); ++i)
            set(r, i, u(rng));
        for (const TensorRef &r : {k, v})
          for (int64_t i = 0; i < r.numel(); ++i)
            set(r, i, u(rng));
        for (int64_t b = 0; b < B; ++b)
          for (int64_t t = 0; t < T; ++t)
            for (int64_t h = 0; h < H; ++h)
              for (int64_t e = 0; e < D; ++e) {
                set(kr, at(H, b, t, h, e), get(k, at(HK, b, t, h / N, e)));
                set(vr, at(H, b, t, h, e), get(v, at(HK, b, t, h / N, e)));
              }
        nlohmann::json attrs = {{"scale", 0.2}, {"causal", true}};
        if (bshd)
          attrs["layout"] = "bshd";
        auto run = [&](const Instruction &in) {
          if (device)
            runLowered(a, in);
          else
            runCpu(a, in);
        };
        run(instr("attention", {q, k, v}, {y, lse}, attrs));
        run(instr("attention_grad", {q, k, v, dy, y, lse}, {dq, dk, dv},
                  attrs));
        run(instr("attention", {q, kr, vr}, {yr, lser}, attrs));
        run(instr("attention_grad", {q, kr, vr, dy, yr, lser}, {dqr, dkr, dvr},
                  attrs));
        std::string what = std::string(device ? "device" : "cpu") +
                           (dtype == DType::F32 ? " f32" : " bf16") +
                           (bshd ? " bshd" : " bhsd");
        size_t bytes = dtype == DType::F32 ? 4 : 2;
        EXPECT_EQ(std::memcmp(a.base() + y.offset, a.base() + yr.offset,
                              y.numel() * bytes),
                  0)
            << "y, " << what;
        EXPECT_EQ(std::memcmp(a.base() + dq.offset, a.base() + dqr.offset,
                              dq.numel() * bytes),
                  0)
            << "dq, " << what;
        EXPECT_EQ(std::memcmp(a.at<float>(lse), a.at<float>(lser),
                              lse.numel() * 4),
                  0)
            << "lse, " << what;
        // dk, dv: the repeated heads' gradients summed over each group.
        float tol = dtype == DType::F32 ? 1e-5f : 2e-2f;
        for (const auto &[g, gr] : {std::pair{dk, dkr}, std::pair{dv, dvr}})
          for (int64_t b = 0; b < B; ++b)
            for (int64_t t = 0; t < T; ++t)
              for (int64_t hk = 0; hk < HK; ++hk)
                for (int64_t e = 0; e < D; ++e) {
                  float want = 0;
                  for (int64_t r = 0; r < N; ++r)
                    want += get(gr, at(H, b, t, hk * N + r, e));
                  float got = get(g, at(HK, b, t, hk, e));
                  ASSERT_NEAR(got, want, tol * (1 + std::fabs(want)))
                      << (g.offset == dk.offset ? "dk" : "dv") << " of batch "
                      << b << ", row " << t << ", key head " << hk << ", "
                      << what;
                }
      }
}

// The device lowering's copies (transpose, slice, concat, split,
// broadcast), which move contiguous runs 16, 8 or 4 bytes at a time where
// the offsets allow it and one element at a time where they do not, give
// the CPU kernels' bytes: f32, bf16, int64 and bool tensors; transposes
// that keep the last dimension (runs) and that move it (single elements);
// slices that start mid-run (unaligned) and step.
TEST(DeviceKernels, CopiesMatchCpuBytes) {
  struct Case {
    std::string op;
    Dims in, out;
    nlohmann::json attrs;
  };
  const std::vector<Case> cases = {
      {"transpose", {2, 6, 3, 16}, {2, 3, 6, 16}, {{"perm", {0, 2, 1, 3}}}},
      {"transpose", {4, 5, 8}, {8, 5, 4}, {{"perm", {2, 1, 0}}}},
      {"transpose", {3, 7, 24}, {7, 3, 24}, {{"perm", {1, 0, 2}}}},
      {"slice", {4, 8, 24}, {4, 8, 8},
       {{"starts", {0, 0, 8}}, {"limits", {4, 8, 16}}, {"strides", {1, 1, 1}}}},
      {"slice", {4, 8, 24}, {4, 4, 7},
       {{"starts", {0, 1, 1}}, {"limits", {4, 8, 8}}, {"strides", {1, 2, 1}}}},
      {"slice", {6, 32}, {3, 16},
       {{"starts", {0, 0}}, {"limits", {6, 32}}, {"strides", {2, 2}}}},
      {"broadcast", {1, 5, 1, 16}, {3, 5, 2, 16}, nlohmann::json::object()},
  };
  for (DType dtype : {DType::F32, DType::BF16, DType::I64, DType::I1})
    for (const Case &t : cases) {
      Arena a;
      TensorRef x = a.add(t.in, dtype), cpu = a.add(t.out, dtype),
                dev = a.add(t.out, dtype);
      std::mt19937 rng(9);
      for (int64_t i = 0; i < (int64_t)x.bytes(); ++i)
        a.base()[x.offset + i] = dtype == DType::I1 ? rng() % 2 : rng() % 251;
      runCpu(a, instr(t.op, {x}, {cpu}, t.attrs));
      runLowered(a, instr(t.op, {x}, {dev}, t.attrs));
      EXPECT_EQ(std::memcmp(a.base() + cpu.offset, a.base() + dev.offset,
                            cpu.bytes()),
                0)
          << t.op << " " << fsdp::shapeString(t.in) << " -> " << fsdp::shapeString(t.out)
          << " dtype " << (int)dtype;
    }
  // The heads transpose of bf16 [.., 3, 16] moves 16-byte elements (two
  // runs of eight): the widening happens, and is what the bytes above hold.
  {
    Arena a;
    TensorRef x = a.add({2, 6, 3, 16}, DType::BF16),
              y = a.add({2, 3, 6, 16}, DType::BF16);
    std::unique_ptr<Comm> comm = localComm();
    Memory mem;
    mem.arena = a.base();
    std::vector<DeviceOp> ops;
    ASSERT_TRUE(lower(instr("transpose", {x}, {y}, {{"perm", {0, 2, 1, 3}}}),
                      mem, *comm, ops));
    ASSERT_EQ(ops.size(), 1u);
    const auto *copy = std::get_if<StridedCopy>(&ops[0].kernel);
    ASSERT_TRUE(copy);
    EXPECT_EQ(copy->elemBytes, 16);
    EXPECT_EQ(ops[0].n, y.numel() / 8);
  }
  // Concat of three parts and the split back (qkv's), in bf16.
  Arena a;
  TensorRef whole = a.add({2, 5, 48}, DType::BF16), back = a.add({2, 5, 48},
                                                                DType::BF16);
  std::vector<TensorRef> parts = {a.add({2, 5, 16}, DType::BF16),
                                  a.add({2, 5, 8}, DType::BF16),
                                  a.add({2, 5, 24}, DType::BF16)};
  std::mt19937 rng(4);
  for (int64_t i = 0; i < (int64_t)whole.bytes(); ++i)
    a.base()[whole.offset + i] = rng() % 251;
  runLowered(a, instr("split", {whole}, parts,
                      {{"axis", 2}, {"sizes", {16, 8, 24}}}));
  runLowered(a, instr("concat", parts, {back}, {{"axis", 2}}));
  EXPECT_EQ(std::memcmp(a.base() + whole.offset, a.base() + back.offset,
                        whole.bytes()),
            0)
      << "split then concat";
}
