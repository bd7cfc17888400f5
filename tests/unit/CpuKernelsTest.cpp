// The CPU backend's kernels against their definitions and double
// references: data movement by definition, every GEMM path against the
// double sum, bf16 products and narrow elementwise ops against the widened
// f32 path, transposes and slices placing every element.

#include "tests/unit/KernelTestSupport.h"

using namespace kerneltest;

// The CPU's data-movement kernels against their definitions, on shapes a
// fast path could mistake for a plain copy: a square transpose (input and
// output of one shape) and broadcasts of a scalar and of a trailing row.
TEST(CpuKernels, TransposeAndBroadcastByDefinition) {
  Arena a;
  TensorRef x = a.add({5, 5}), t = a.add({5, 5});
  a.fill(x, -1.0f, 1.0f);
  nlohmann::json perm;
  perm["perm"] = {1, 0};
  runCpu(a, instr("transpose", {x}, {t}, perm));
  for (int64_t i = 0; i < 5; ++i)
    for (int64_t j = 0; j < 5; ++j)
      ASSERT_EQ(a.at<float>(t)[i * 5 + j], a.at<float>(x)[j * 5 + i]);
  TensorRef s = a.add({}), row = a.add({3}), bs = a.add({4, 3}),
            br = a.add({2, 4, 3}), col = a.add({4, 1}), bc = a.add({4, 3});
  a.fill(s, 2.0f, 2.0f);
  a.fill(row, -1.0f, 1.0f);
  a.fill(col, -1.0f, 1.0f);
  runCpu(a, instr("broadcast", {s}, {bs}, nlohmann::json::object()));
  runCpu(a, instr("broadcast", {row}, {br}, nlohmann::json::object()));
  runCpu(a, instr("broadcast", {col}, {bc}, nlohmann::json::object()));
  for (int64_t i = 0; i < 12; ++i)
    ASSERT_EQ(a.at<float>(bs)[i], a.at<float>(s)[0]);
  for (int64_t i = 0; i < 24; ++i)
    ASSERT_EQ(a.at<float>(br)[i], a.at<float>(row)[i % 3]);
  for (int64_t i = 0; i < 12; ++i)
    ASSERT_EQ(a.at<float>(bc)[i], a.at<float>(col)[i / 3]);
}

// A matmul on bf16 tensors where the CPU multiplies bf16 (oneDNN on
// AVX512-BF16 or AMX: cpu/Gemm.h) equals the widened f32 product rounded
// once, within the one bf16 step that the two summation orders can put
// between them: 2-D with a bias, transposed operands, batched with a
// broadcast right-hand side, and batched on both sides.
// f32 products on each library and path (a single product, a batch of
// activations against one weight as one product, the oneDNN matmul
// primitive where B is transposed and k > n, with the bias in its epilogue;
// batches split one per thread) against the double sum: 1e-5 relative
// leaves room for a 96-term float sum's rounding (about 1e-6) in any order.
TEST(CpuKernels, F32MatmulPathsMatchTheDoubleSum) {
  struct Case {
    Dims a, b, y;
    bool ta, tb, bias;
  };
  cpu::GemmLibrary was = cpu::gemmLibrary();
  for (cpu::GemmLibrary lib :
       {cpu::GemmLibrary::OpenBLAS, cpu::GemmLibrary::OneDNN}) {
    cpu::setGemmLibrary(lib);
    for (const Case &k :
         {Case{{2, 8, 96}, {16, 96}, {2, 8, 16}, false, true, true},
          Case{{24, 96}, {16, 96}, {24, 16}, false, true, false},
          Case{{2, 8, 16}, {40, 16}, {2, 8, 40}, false, true, true},
          Case{{3, 9, 12}, {12, 7}, {3, 9, 7}, false, false, true},
          Case{{12, 9}, {12, 7}, {9, 7}, true, false, false},
          Case{{3, 9, 12}, {3, 20, 12}, {3, 9, 20}, false, true, false},
          // Empty products (OpInfo's [S, 0] x [0, M]): the bias or zeros;
          // oneDNN's sgemm crashed on k = 0.
          Case{{4, 0}, {0, 5}, {4, 5}, false, false, true},
          Case{{4, 0}, {0, 5}, {4, 5}, false, false, false},
          Case{{2, 4, 0}, {5, 0}, {2, 4, 5}, false, true, false},
          Case{{0, 3}, {3, 5}, {0, 5}, false, false, true}}) {
      Arena a;
      TensorRef x = a.add(k.a), w = a.add(k.b), y = a.add(k.y),
                bias = a.add({k.y.back()});
      a.fill(x, -1.0f, 1.0f);
      a.fill(w, -1.0f, 1.0f);
      a.fill(bias, -1.0f, 1.0f);
      a.fill(y, 1e30f, 1e30f);
      std::vector<TensorRef> ins = {x, w};
      if (k.bias)
        ins.push_back(bias);
      runCpu(a, instr("matmul", ins, {y},
                      {{"transpose_lhs", k.ta}, {"transpose_rhs", k.tb}}));
      int64_t n = k.y.back(), m = k.y[k.y.size() - 2],
              depth = k.ta ? k.a[k.a.size() - 2] : k.a.back();
      if (y.numel() == 0)
        continue; // nothing to compare; it must not crash
      int64_t batches = y.numel() / (m * n);
      bool batchedB = k.b.size() == k.y.size();
      std::vector<float> want(y.numel());
      for (int64_t bi = 0; bi < batches; ++bi)
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            const float *pa =
                a.at<float>(x) + (k.a.size() > 2 ? bi * m * depth : 0);
            const float *pb = a.at<float>(w) + (batchedB ? bi * n * depth : 0);
            double sum = k.bias ? a.at<float>(bias)[j] : 0.0;
            for (int64_t p = 0; p < depth; ++p)
              sum += (double)(k.ta ? pa[p * m + i] : pa[i * depth + p]) *
                     (k.tb ? pb[j * depth + p] : pb[p * n + j]);
            want[(bi * m + i) * n + j] = (float)sum;
          }
      expectClose(want.data(), a.at<float>(y), y.numel(),
                  std::string("f32 matmul on ") + cpu::gemmLibraryName(lib),
                  1e-5f);
    }
  }
  cpu::setGemmLibrary(was);
}

TEST(CpuKernels, Bf16MatmulEqualsWidenedProduct) {
  if (!cpu::nativeBf16Gemm())
    GTEST_SKIP() << "this CPU has no bf16 products (AVX512-BF16 or AMX)";
  struct Case {
    Dims a, b, y;
    bool ta, tb, bias;
  };
  for (const Case &k :
       {Case{{37, 70}, {70, 45}, {37, 45}, false, false, true},
        Case{{70, 37}, {45, 70}, {37, 45}, true, true, false},
        Case{{2, 3, 17, 40}, {40, 33}, {2, 3, 17, 33}, false, false, true},
        Case{{3, 17, 40}, {3, 33, 40}, {3, 17, 33}, false, true, false},
        // Empty products: the bias, or zeros (oneDNN's primitive refuses).
        Case{{4, 0}, {0, 5}, {4, 5}, false, false, true},
        Case{{4, 0}, {0, 5}, {4, 5}, false, false, false}}) {
    Arena a;
    TensorRef af = a.add(k.a), bf = a.add(k.b), yf = a.add(k.y),
              biasf = a.add({k.y.back()});
    TensorRef an = a.add(k.a, DType::BF16), bn = a.add(k.b, DType::BF16),
              yn = a.add(k.y, DType::BF16),
              biasn = a.add({k.y.back()}, DType::BF16);
    // Values exact in bf16, so both sides multiply the same numbers.
    auto fill = [&](const TensorRef &f, const TensorRef &n) {
      a.fill(f, -2.0f, 2.0f);
      for (int64_t i = 0; i < f.numel(); ++i) {
        a.at<uint16_t>(n)[i] = bf16FromFloat(a.at<float>(f)[i]);
        a.at<float>(f)[i] = floatFromBf16(a.at<uint16_t>(n)[i]);
      }
    };
    fill(af, an);
    fill(bf, bn);
    fill(biasf, biasn);
    nlohmann::json attrs = {{"transpose_lhs", k.ta}, {"transpose_rhs", k.tb}};
    std::vector<TensorRef> wide = {af, bf}, narrow = {an, bn};
    if (k.bias) {
      wide.push_back(biasf);
      narrow.push_back(biasn);
    }
    Instruction n = instr("matmul", narrow, {yn}, attrs);
    ASSERT_TRUE(cpu::runsNarrow(n));
    runCpu(a, instr("matmul", wide, {yf}, attrs));
    runCpu(a, n);
    std::vector<float> want(yf.numel()), got(yf.numel());
    for (int64_t i = 0; i < yf.numel(); ++i) {
      want[i] = floatFromBf16(bf16FromFloat(a.at<float>(yf)[i]));
      got[i] = floatFromBf16(a.at<uint16_t>(yn)[i]);
    }
    expectClose(want.data(), got.data(), yf.numel(), "bf16 matmul", 1.0f / 128);
  }
}

// Elementwise ops on bf16 or f16 tensors run as they are (cpu::runsNarrow):
// each element loaded to f32, the f32 op, one rounding. That is what the
// widened copies compute, bit for bit: a binary op plain, with a bias
// broadcast along rows, with a scalar and with a general broadcast, unary
// ones (GELU both ways, exp) and GELU's gradient, against f32 kernels on the
// widened values whose results are rounded the same way.
TEST(CpuKernels, NarrowElementwiseEqualsWidened) {
  struct Case {
    const char *op;
    Dims a, b, y;
    nlohmann::json attrs;
  };
  const nlohmann::json none = nlohmann::json::object();
  for (DType type : {DType::BF16, DType::F16})
    for (const Case &k :
         {Case{"add", {6, 50}, {6, 50}, {6, 50}, none},
          Case{"mul", {4, 3, 40}, {40}, {4, 3, 40}, none},
          Case{"sub", {5}, {7, 5}, {7, 5}, none},
          Case{"div", {9, 33}, {}, {9, 33}, none},
          Case{"max", {3, 1, 8}, {1, 5, 8}, {3, 5, 8}, none},
          Case{"gelu", {300}, {}, {300}, {{"approximate", "tanh"}}},
          Case{"gelu", {300}, {}, {300}, {{"approximate", "none"}}},
          Case{"exp", {70}, {}, {70}, none},
          Case{"gelu_grad", {90}, {90}, {90}, {{"approximate", "tanh"}}},
          Case{"gelu_grad", {90}, {90}, {90}, {{"approximate", "none"}}}}) {
      bool unaryOp = std::string(k.op) == "gelu" || std::string(k.op) == "exp";
      Arena a;
      TensorRef af = a.add(k.a), bf = a.add(k.b), yf = a.add(k.y);
      TensorRef an = a.add(k.a, type), bn = a.add(k.b, type),
                yn = a.add(k.y, type);
      auto narrowOf = [&](float v) {
        return type == DType::BF16 ? bf16FromFloat(v) : f16FromFloat(v);
      };
      auto wideOf = [&](uint16_t h) {
        return type == DType::BF16 ? floatFromBf16(h) : floatFromF16(h);
      };
      for (auto [f, n] : {std::pair{af, an}, std::pair{bf, bn}}) {
        a.fill(f, -3.0f, 3.0f);
        for (int64_t i = 0; i < f.numel(); ++i) {
          a.at<uint16_t>(n)[i] = narrowOf(a.at<float>(f)[i]);
          a.at<float>(f)[i] = wideOf(a.at<uint16_t>(n)[i]);
        }
      }
      std::vector<TensorRef> wide = {af}, narrow = {an};
      if (!unaryOp) {
        wide.push_back(bf);
        narrow.push_back(bn);
      }
      Instruction n = instr(k.op, narrow, {yn}, k.attrs);
      ASSERT_TRUE(cpu::runsNarrow(n)) << k.op;
      runCpu(a, instr(k.op, wide, {yf}, k.attrs));
      runCpu(a, n);
      for (int64_t i = 0; i < yf.numel(); ++i)
        ASSERT_EQ(narrowOf(a.at<float>(yf)[i]), a.at<uint16_t>(yn)[i])
            << k.op << " element " << i;
    }
}

// Transposes and strided slices copy every element where the index
// arithmetic puts it, whatever path the CPU kernel takes: rows of
// dimensions contiguous in the source (a head split), tiles of a transposed
// pair with partial tiles at the edges, and the element-by-element rest;
// for 1-, 2-, 4- and 8-byte elements. Against the index arithmetic itself,
// element for element.
TEST(CpuKernels, TransposesAndSlicesPlaceEveryElement) {
  struct Case {
    const char *op;
    Dims x;
    Dims perm, starts, steps; // transpose: perm; slice: starts and steps
  };
  std::vector<Case> cases;
  for (Dims perm : {Dims{0, 1, 2}, Dims{0, 2, 1}, Dims{1, 0, 2}, Dims{1, 2, 0},
                    Dims{2, 0, 1}, Dims{2, 1, 0}})
    cases.push_back({"transpose", {3, 5, 7}, perm, {}, {}});
  for (Dims perm : {Dims{0, 2, 1, 3}, Dims{0, 2, 3, 1}, Dims{0, 3, 1, 2}})
    cases.push_back({"transpose", {2, 37, 3, 33}, perm, {}, {}});
  cases.push_back({"transpose", {2, 70, 45}, {0, 2, 1}, {}, {}});
  cases.push_back({"slice", {6, 9, 8}, {}, {1, 2, 0}, {2, 3, 1}});
  cases.push_back({"slice", {6, 9, 8}, {}, {0, 1, 3}, {1, 1, 2}});
  for (DType type : {DType::I1, DType::BF16, DType::F32, DType::I64})
    for (const Case &k : cases) {
      bool transpose = std::string(k.op) == "transpose";
      Dims y;
      for (size_t d = 0; d < k.x.size(); ++d)
        y.push_back(transpose
                        ? k.x[k.perm[d]]
                        : (k.x[d] - k.starts[d] + k.steps[d] - 1) / k.steps[d]);
      Arena a;
      TensorRef x = a.add(k.x, type), out = a.add(y, type);
      int64_t size = dtypeSize(type);
      for (int64_t i = 0; i < x.numel() * size; ++i) // each byte its own
        a.at<uint8_t>(x)[i] = uint8_t(i * 7 + i / 251);
      if (type == DType::I1)
        for (int64_t i = 0; i < x.numel(); ++i)
          a.at<uint8_t>(x)[i] &= 1;
      nlohmann::json attrs = transpose ? nlohmann::json{{"perm", k.perm}}
                                       : nlohmann::json{{"starts", k.starts},
                                                        {"strides", k.steps}};
      runCpu(a, instr(k.op, {x}, {out}, attrs));
      Dims xs(k.x.size(), 1);
      for (int64_t d = (int64_t)k.x.size() - 2; d >= 0; --d)
        xs[d] = xs[d + 1] * k.x[d + 1];
      for (int64_t i = 0; i < out.numel(); ++i) {
        int64_t rest = i, from = 0;
        for (int64_t d = (int64_t)y.size() - 1; d >= 0; --d) {
          int64_t idx = rest % y[d];
          rest /= y[d];
          from += transpose ? idx * xs[k.perm[d]]
                            : (k.starts[d] + idx * k.steps[d]) * xs[d];
        }
        ASSERT_EQ(0, std::memcmp(a.at<uint8_t>(out) + i * size,
                                 a.at<uint8_t>(x) + from * size, size))
            << k.op << " of " << dtypeName(type) << " element " << i;
      }
    }
}
