// The CUDA backend's kernels (runtime/device/DeviceKernels.h), run
// on the host, against the CPU backend's kernel of the same op on the same
// random inputs. Both compute element math in float and accumulate in
// double in the same order, so most agree exactly; the tolerance (1e-6
// relative to |value| + 0.1) covers the CPU's float accumulation in the
// reductions over middle axes and libm's last bit.
#include "tests/unit/KernelTestSupport.h"

using namespace kerneltest;

// Every row of common/UnaryOps.def (and GELU's two forms): the CPU
// kernel against the device kernel, and both against the row's scalar in
// double, over inputs that cross each op's interesting range.
TEST(DeviceKernels, UnaryMatchesCpu) {
  struct Case {
    const char *op;
    UnaryKind kind;
    double (*reference)(double); // null: no double form (GELU)
    bool tanhGelu;
  } cases[] = {
#define FSDP_UNARY(Class, name, onnx, aten, floatOnly, scalar)                 \
  {name, UnaryKind::Class, [](double x) { return um::unary##Class(x); }, false},
#include "common/UnaryOps.def"
#undef FSDP_UNARY
      {"gelu", UnaryKind::Gelu, nullptr, false},
      {"gelu", UnaryKind::GeluTanh, nullptr, true}};
  for (const Case &k : cases) {
    Arena a;
    TensorRef x = a.add({7, 13}), y = a.add({7, 13});
    std::string op = k.op;
    bool positive =
        op == "log" || op == "log1p" || op == "sqrt" || op == "rsqrt";
    bool unit = op == "asin" || op == "acos" || op == "erfinv"; // (-1, 1)
    a.fill(x, unit ? -0.95f : positive ? 0.1f : -3.0f, unit ? 0.95f : 3.0f);
    std::vector<float> got(y.numel());
    runOnHost(x.numel(), Unary{k.kind, a.at<float>(x), got.data()});
    nlohmann::json attrs = nlohmann::json::object();
    if (k.tanhGelu)
      attrs["approximate"] = "tanh";
    runCpu(a, instr(k.op, {x}, {y}, attrs));
    if (op == "gelu") {
      // x (1 + erf) cancels for negative x: within roundings of x.
      std::vector<float> scale(a.at<float>(x), a.at<float>(x) + x.numel());
      expectCloseScaled(a.at<float>(y), got.data(), y.numel(), scale, k.op);
    } else {
      expectClose(a.at<float>(y), got.data(), y.numel(), k.op);
    }
    if (!k.reference)
      continue;
    // Against the double form: within a few float roundings (libmvec's
    // vector functions are within 4 ulp).
    std::vector<float> exact(y.numel());
    for (int64_t i = 0; i < x.numel(); ++i)
      exact[i] = (float)k.reference((double)a.at<float>(x)[i]);
    expectClose(exact.data(), a.at<float>(y), y.numel(), op + " (CPU)", 2e-6f);
    expectClose(exact.data(), got.data(), y.numel(), op + " (device)", 2e-6f);
  }
}

/// The plan name of a BinaryOps.def row.
static const char *planName(BinaryKind k) {
  switch (k) {
#define FSDP_BINARY(Class, name, onnx, kind, scalar, integer)                  \
  case BinaryKind::Class:                                                      \
    return name;
#include "common/BinaryOps.def"
#undef FSDP_BINARY
  }
  return "";
}

TEST(DeviceKernels, BroadcastBinaryMatchesCpu) {
  // The arithmetic rows of common/BinaryOps.def, each with its scalar in
  // double as the reference.
  struct Case {
    const char *op;
    BinaryKind kind;
    double (*reference)(double, double);
  } cases[] = {
#define Arith(Class)                                                           \
  {#Class, BinaryKind::Class, ::fsdp::um::binary##Class<double>},
#define Compare(Class)
#define Logic(Class)
#define FSDP_BINARY(Class, name, onnx, kind, scalar, integer) kind(Class)
#include "common/BinaryOps.def"
#undef FSDP_BINARY
#undef Arith
#undef Compare
#undef Logic
  };
  // A bias along the last axis, a column, a scalar, and both sides
  // broadcasting.
  std::vector<std::pair<Dims, Dims>> shapes = {{{2, 3, 4}, {4}},
                                               {{2, 3, 4}, {3, 1}},
                                               {{2, 3, 4}, {1}},
                                               {{2, 1, 4}, {3, 1}}};
  for (const Case &k : cases)
    for (auto &[sa, sb] : shapes) {
      Arena a;
      Dims out = {2, 3, 4};
      TensorRef ta = a.add(sa), tb = a.add(sb), y = a.add(out);
      a.fill(ta, 0.5f, 2.0f);
      a.fill(tb, 0.5f, 2.0f);
      Binary f{k.kind, {}, a.at<float>(ta), a.at<float>(tb), nullptr};
      ASSERT_TRUE(broadcastIndex(out, {&sa, &sb}, f.index));
      std::vector<float> got(y.numel());
      f.y = got.data();
      runOnHost(y.numel(), f);
      runCpu(a, instr(planName(k.kind), {ta, tb}, {y}));
      expectClose(a.at<float>(y), got.data(), y.numel(), k.op);
      // Against the double scalar on the same (broadcast) operands.
      std::vector<float> want(y.numel());
      for (int64_t i = 0; i < y.numel(); ++i) {
        int64_t off[2];
        f.index.offsets(i, off, 2);
        want[i] = (float)k.reference(a.at<float>(ta)[off[0]],
                                     a.at<float>(tb)[off[1]]);
      }
      expectClose(want.data(), got.data(), y.numel(), k.op);
    }
  Dims bad = {5}, out = {2, 3, 4};
  Strided s;
  EXPECT_FALSE(broadcastIndex(out, {&bad}, s));
}

// The elementwise kernels on bf16/f16 tensors (the device reads and
// writes them without f32 copies: ComputeOps.h's isElementwise) against
// the same kernels on f32 copies, rounded after: equal bit for bit, since
// the widened computation is element for element. The sum mixes a bf16
// operand with an f32 bias, as activations and biases come.
TEST(DeviceKernels, ElementwiseOnNarrowTensorsEqualsWidened) {
  for (ElemType t : {ElemType::BF16, ElemType::F16}) {
    bool f16 = t == ElemType::F16;
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-3.0f, 3.0f);
    const int n = 96, cols = 8;
    std::vector<uint16_t> xn(n), gn(n), got(n);
    std::vector<float> xf(n), gf(n), bias(cols), wide(n);
    for (int i = 0; i < n; ++i) {
      xn[i] = floatToNarrow(f16, u(rng));
      xf[i] = narrowToFloat(f16, xn[i]);
      gn[i] = floatToNarrow(f16, u(rng));
      gf[i] = narrowToFloat(f16, gn[i]);
    }
    for (float &b : bias)
      b = u(rng);
    auto expectRounded = [&](const char *what) {
      for (int i = 0; i < n; ++i)
        ASSERT_EQ(floatToNarrow(f16, wide[i]), got[i])
            << what << (f16 ? " f16" : " bf16") << " element " << i;
    };
    for (UnaryKind k : {UnaryKind::GeluTanh, UnaryKind::Gelu, UnaryKind::Exp,
                        UnaryKind::Silu, UnaryKind::Tanh}) {
      runOnHost(n, Unary{k, xf.data(), wide.data()});
      runOnHost(n, Unary{k, xn.data(), got.data(), t, t});
      expectRounded("unary");
    }
    Dims out = {n / cols, cols}, row = {cols};
    Binary w{BinaryKind::Add, {}, xf.data(), bias.data(), wide.data()};
    ASSERT_TRUE(broadcastIndex(out, {&out, &row}, w.index));
    Binary g = w;
    g.a = xn.data();
    g.y = got.data();
    g.ta = g.ty = t;
    runOnHost(n, w);
    runOnHost(n, g);
    expectRounded("add");
    for (bool tanhApprox : {false, true}) {
      runOnHost(n, GeluGrad{tanhApprox, xf.data(), gf.data(), wide.data()});
      runOnHost(
          n, GeluGrad{tanhApprox, xn.data(), gn.data(), got.data(), t, t, t});
      expectRounded("gelu_grad");
    }
  }
}

TEST(DeviceKernels, ReductionsMatchCpu) {
  struct Case {
    const char *op;
    ReduceKind kind;
  } kinds[] = {{"reduce_sum", ReduceKind::Sum},
               {"reduce_mean", ReduceKind::Mean},
               {"reduce_max", ReduceKind::Max}};
  Dims in = {3, 4, 5};
  std::vector<Dims> axesList = {{2}, {0}, {1}, {0, 2}, {0, 1, 2}};
  for (const Case &k : kinds)
    for (const Dims &axes : axesList) {
      Arena a;
      Dims out;
      for (int64_t d = 0; d < 3; ++d)
        if (std::find(axes.begin(), axes.end(), d) == axes.end())
          out.push_back(in[d]);
      TensorRef x = a.add(in), y = a.add(out.empty() ? Dims{} : out);
      a.fill(x, -2.0f, 2.0f);
      Reduce f;
      ASSERT_TRUE(reduceIndex(in, axes, k.kind, f));
      std::vector<float> got(y.numel());
      f.x = a.at<float>(x);
      f.y = got.data();
      runOnHost(y.numel(), f);
      runCpu(a, instr(k.op, {x}, {y}, {{"axes", axes}, {"keepdims", false}}));
      expectClose(a.at<float>(y), got.data(), y.numel(),
                  std::string(k.op) + " over " + std::to_string(axes.size()) +
                      " axes");
    }
}

// The gradient norm's term: every element squared and summed in double,
// rounded once. The CPU kernel and the lowered device kernels (split into
// chunks here: 61440 elements into one output; on f32 and on bf16 read as
// it is) both equal the double sum rounded to f32, to the last place the
// two summation orders can move it.
TEST(DeviceKernels, SumSquaresIsTheDoubleSum) {
  for (DType t : {DType::F32, DType::BF16}) {
    Arena a;
    Dims in = {64, 40, 24};
    TensorRef x = a.add(in), xn = a.add(in, t), yn = a.add({}, t),
              yc = a.add({});
    a.fill(x, -2.0f, 2.0f);
    double want = 0;
    for (int64_t i = 0; i < x.numel(); ++i) {
      storeElem(static_cast<ElemType>(t), a.at<void>(xn), i, a.at<float>(x)[i]);
      a.at<float>(x)[i] =
          (float)loadElem(static_cast<ElemType>(t), a.at<void>(xn), i);
      want += (double)a.at<float>(x)[i] * a.at<float>(x)[i];
    }
    const nlohmann::json none = nlohmann::json::object();
    runLowered(a, instr("sum_squares", {xn}, {yn}, none));
    runCpu(a, instr("sum_squares", {x}, {yc}, none));
    float wanted = (float)want;
    float lowered = t == DType::F32 ? a.at<float>(yn)[0]
                                    : floatFromBf16(a.at<uint16_t>(yn)[0]);
    expectClose(&wanted, a.at<float>(yc), 1, "sum_squares (cpu)");
    expectClose(&wanted, &lowered, 1, "sum_squares (lowered)",
                t == DType::F32 ? 1e-6f : 1.0f / 128);
  }
}

// Reductions into few outputs split each sum into chunks (ComputeOps.h's
// reduceChunks: 80 chunks of 32 here) whose partial sums are combined in
// order; as lowered, on f32 and on bf16 input (read as it is, no f32
// copy). Double sums in another order: the f32 tolerance as above; bf16
// results may round the other way, one bf16 step (2^-8 relative).
TEST(DeviceKernels, SplitReductionsMatchCpu) {
  const char *ops[] = {"reduce_sum", "reduce_mean", "reduce_max"};
  for (DType t : {DType::F32, DType::BF16})
    for (const char *op : ops)
      for (Dims axes : {Dims{0, 1}, Dims{0}, Dims{1}}) {
        // Leading axes, and a middle one (the CPU's [outer, count, inner]
        // loop, Reductions.cpp).
        Arena a;
        Dims in = {64, 40, 24}, out = axes.size() == 2 ? Dims{24}
                                      : axes[0] == 0   ? Dims{40, 24}
                                                       : Dims{64, 24};
        TensorRef x = a.add(in), y = a.add(out), xn = a.add(in, t),
                  yn = a.add(out, t);
        a.fill(x, -2.0f, 2.0f);
        for (int64_t i = 0; i < x.numel(); ++i) {
          storeElem(static_cast<ElemType>(t), a.at<void>(xn), i,
                    a.at<float>(x)[i]);
          a.at<float>(x)[i] =
              (float)loadElem(static_cast<ElemType>(t), a.at<void>(xn), i);
        }
        nlohmann::json attrs = {{"axes", axes}, {"keepdims", false}};
        runLowered(a, instr(op, {xn}, {yn}, attrs));
        runCpu(a, instr(op, {x}, {y}, attrs));
        for (int64_t i = 0; i < y.numel(); ++i) {
          float want = a.at<float>(y)[i],
                got = (float)loadElem(static_cast<ElemType>(t), a.at<void>(yn),
                                      i);
          float tol = t == DType::F32 ? 1e-6f * (std::fabs(want) + 0.1f)
                                      : std::fabs(want) / 256 + 1e-6f;
          ASSERT_NEAR(want, got, tol) << op << " element " << i;
        }
      }
}

// Integer sums and maxima in int64, exactly, on both backends: values
// past 2^53 (where a float or double accumulator rounds them), a sum that
// wraps past 2^63 as PyTorch's does, and few outputs over many elements,
// where a float reduction would be split into chunks.
TEST(DeviceKernels, IntegerReductionsAreExact) {
  for (const char *op : {"reduce_sum", "reduce_max"})
    for (Dims axes : {Dims{1}, Dims{0}, Dims{0, 1}}) {
      Arena a;
      Dims in = {64, 40}, out = axes.size() == 2 ? Dims{}
                                : axes[0] == 0   ? Dims{40}
                                                 : Dims{64};
      TensorRef x = a.add(in, DType::I64), yc = a.add(out, DType::I64),
                yn = a.add(out, DType::I64);
      int64_t *px = a.at<int64_t>(x);
      for (int64_t i = 0; i < x.numel(); ++i)
        px[i] = (int64_t(1) << 60) + (i * 7919) % 1000 - 500;
      px[5] = INT64_MAX; // the sums over it wrap
      nlohmann::json attrs = {{"axes", axes}, {"keepdims", false}};
      runLowered(a, instr(op, {x}, {yn}, attrs));
      runCpu(a, instr(op, {x}, {yc}, attrs));
      bool sum = std::string(op) == "reduce_sum";
      std::vector<uint64_t> want(yc.numel(), sum ? 0 : (uint64_t)INT64_MIN);
      for (int64_t r = 0; r < 64; ++r)
        for (int64_t col = 0; col < 40; ++col) {
          int64_t o = axes.size() == 2 ? 0 : axes[0] == 0 ? col : r;
          int64_t v = px[r * 40 + col];
          want[o] = sum ? want[o] + (uint64_t)v
                        : (uint64_t)std::max((int64_t)want[o], v);
        }
      for (int64_t i = 0; i < yc.numel(); ++i) {
        ASSERT_EQ((int64_t)want[i], a.at<int64_t>(yc)[i])
            << op << " (cpu) output " << i << " of " << axes.size() << " axes";
        ASSERT_EQ((int64_t)want[i], a.at<int64_t>(yn)[i])
            << op << " (lowered) output " << i;
      }
    }
}

// Binary ops on two i64 tensors are exact, as PyTorch's integer kernels: at
// 2^60, where double (the mixed path) rounds by 256 and 2^60 + 1 compares
// equal to 2^60; with wrapping past 2^63 and division truncated toward
// zero; both backends, broadcasting. The reference is 128-bit arithmetic.
TEST(DeviceKernels, IntegerBinaryOpsAreExact) {
  using Wide = __int128;
  struct Case {
    const char *op;
    int64_t (*reference)(int64_t, int64_t);
    bool smallExponent;
  };
  static const Case cases[] = {
      {"add",
       [](int64_t a, int64_t b) {
         return (int64_t)(uint64_t)(unsigned __int128)((Wide)a + b);
       },
       false},
      {"sub",
       [](int64_t a, int64_t b) {
         return (int64_t)(uint64_t)(unsigned __int128)((Wide)a - b);
       },
       false},
      {"mul",
       [](int64_t a, int64_t b) {
         return (int64_t)(uint64_t)(unsigned __int128)((Wide)a * b);
       },
       false},
      {"div",
       [](int64_t a, int64_t b) {
         return (int64_t)(uint64_t)(unsigned __int128)((Wide)a / b);
       },
       false},
      {"pow",
       [](int64_t a, int64_t b) {
         unsigned __int128 r = 1;
         for (int64_t i = 0; i < b; ++i)
           r = (uint64_t)(r * (unsigned __int128)(uint64_t)a);
         return (int64_t)(uint64_t)r;
       },
       true},
      {"max", [](int64_t a, int64_t b) { return std::max(a, b); }, false},
      {"min", [](int64_t a, int64_t b) { return std::min(a, b); }, false},
      {"equal", [](int64_t a, int64_t b) { return (int64_t)(a == b); }, false},
      {"less", [](int64_t a, int64_t b) { return (int64_t)(a < b); }, false},
      {"greater", [](int64_t a, int64_t b) { return (int64_t)(a > b); }, false},
  };
  for (const Case &k : cases) {
    Arena a;
    bool compare = std::string(k.op) == "equal" ||
                   std::string(k.op) == "less" ||
                   std::string(k.op) == "greater";
    DType out = compare ? DType::I1 : DType::I64;
    TensorRef x = a.add({4, 5}, DType::I64), y = a.add({5}, DType::I64),
              zc = a.add({4, 5}, out), zn = a.add({4, 5}, out);
    int64_t *px = a.at<int64_t>(x), *py = a.at<int64_t>(y);
    const int64_t big = int64_t(1) << 60;
    for (int64_t i = 0; i < 20; ++i)
      px[i] = (i % 2 ? -big : big) + (i * 7919) % 1001 - 500;
    px[3] = INT64_MIN; // INT64_MIN / -1 wraps
    px[7] = INT64_MAX;
    int64_t divisors[5] = {3, -1, 7, big + 1, -(big - 3)};
    for (int64_t j = 0; j < 5; ++j)
      py[j] = k.smallExponent ? j + 1 : divisors[j];
    if (!k.smallExponent)
      px[1] = big + 1, py[1] = -1, px[6] = big + 1; // px[6] vs py[1]: equal
    runLowered(a, instr(k.op, {x, y}, {zn}));
    runCpu(a, instr(k.op, {x, y}, {zc}));
    for (int64_t i = 0; i < 20; ++i) {
      int64_t want = k.reference(px[i], py[i % 5]);
      int64_t cpu = compare ? a.at<uint8_t>(zc)[i] : a.at<int64_t>(zc)[i];
      int64_t lowered = compare ? a.at<uint8_t>(zn)[i] : a.at<int64_t>(zn)[i];
      ASSERT_EQ(want, cpu) << k.op << " (cpu) of " << px[i] << " and "
                           << py[i % 5];
      ASSERT_EQ(want, lowered)
          << k.op << " (lowered) of " << px[i] << " and " << py[i % 5];
    }
  }
}

// Neg and abs of an i64 tensor (the unary rows the dialect allows on
// integers) are exact on both backends; they were refused at run time.
TEST(DeviceKernels, IntegerNegAndAbsAreExact) {
  const int64_t big = int64_t(1) << 60;
  const int64_t values[6] = {0, 7, -7, big + 1, -(big + 3), INT64_MIN};
  for (const char *op : {"neg", "abs"}) {
    Arena a;
    TensorRef x = a.add({6}, DType::I64), yc = a.add({6}, DType::I64),
              yn = a.add({6}, DType::I64);
    for (int64_t i = 0; i < 6; ++i)
      a.at<int64_t>(x)[i] = values[i];
    runLowered(a, instr(op, {x}, {yn}));
    runCpu(a, instr(op, {x}, {yc}));
    bool neg = std::string(op) == "neg";
    for (int64_t i = 0; i < 6; ++i) {
      int64_t v = values[i];
      // -INT64_MIN wraps to INT64_MIN, as in PyTorch.
      int64_t want = v == INT64_MIN ? INT64_MIN : neg ? -v : v < 0 ? -v : v;
      ASSERT_EQ(want, a.at<int64_t>(yc)[i]) << op << " (cpu) of " << v;
      ASSERT_EQ(want, a.at<int64_t>(yn)[i]) << op << " (lowered) of " << v;
    }
  }
}

// scatter_add of int64 data (tokens per expert, a histogram) adds exactly
// on both backends, repeated indices too; the CPU kernel had read the
// int64 data as f32.
TEST(DeviceKernels, ScatterAddOfIntegersIsExact) {
  Arena a;
  const int64_t big = int64_t(1) << 60;
  TensorRef dest = a.add({5, 3}, DType::I64), idx = a.add({4}, DType::I64),
            upd = a.add({4, 3}, DType::I64), yc = a.add({5, 3}, DType::I64),
            yn = a.add({5, 3}, DType::I64);
  const int64_t at[4] = {1, 4, 1, -1}; // row 1 twice, row 4 twice (-1)
  for (int64_t i = 0; i < 15; ++i)
    a.at<int64_t>(dest)[i] = big + i;
  for (int64_t j = 0; j < 4; ++j) {
    a.at<int64_t>(idx)[j] = at[j];
    for (int64_t t = 0; t < 3; ++t)
      a.at<int64_t>(upd)[j * 3 + t] = j * 10 + t + 1;
  }
  nlohmann::json attrs = {{"axis", 0}};
  runLowered(a, instr("scatter_add", {dest, idx, upd}, {yn}, attrs));
  runCpu(a, instr("scatter_add", {dest, idx, upd}, {yc}, attrs));
  for (int64_t r = 0; r < 5; ++r)
    for (int64_t t = 0; t < 3; ++t) {
      int64_t want = big + r * 3 + t;
      for (int64_t j = 0; j < 4; ++j)
        if ((at[j] + 5) % 5 == r)
          want += j * 10 + t + 1;
      ASSERT_EQ(want, a.at<int64_t>(yc)[r * 3 + t]) << "cpu row " << r;
      ASSERT_EQ(want, a.at<int64_t>(yn)[r * 3 + t]) << "lowered row " << r;
    }
}

// An integer division by zero is an error on the CPU backend, as in
// PyTorch's CPU kernel, not a value.
TEST(DeviceKernels, IntegerDivisionByZeroIsAnError) {
  Arena a;
  TensorRef x = a.add({3}, DType::I64), y = a.add({3}, DType::I64),
            z = a.add({3}, DType::I64);
  for (int64_t i = 0; i < 3; ++i)
    a.at<int64_t>(x)[i] = 10 + i, a.at<int64_t>(y)[i] = 2 - i;
  std::vector<double> scratch(1 << 10);
  cpu::Context c;
  c.arena = a.base();
  c.scratch = reinterpret_cast<float *>(scratch.data());
  Instruction in = instr("div", {x, y}, {z});
  Status s = cpu::kernelFor(in.op)(in, c);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("division by zero"), std::string::npos)
      << s.message();
}

// A NaN in the input makes the maximum over it NaN, as PyTorch's amax, on
// the CPU's three loops (trailing axes, a leading or middle block, any
// other) and as lowered (split or not); the other outputs stay as they
// were. std::max(acc, v) had kept the running value against a NaN.
// fsdp.uniform: both backends draw the same values, in [0, 1), of as many
// bits as the result type's significand (a bf16 draw is never rounded up
// to 1), new at the next step.
TEST(DeviceKernels, UniformDrawsMatchCpu) {
  const int64_t n = 4096;
  nlohmann::json attrs = {{"seed", 12345}};
  for (DType t : {DType::F32, DType::BF16, DType::F16}) {
    Arena a;
    TensorRef yc = a.add({n}, t), yn = a.add({n}, t), y2 = a.add({n}, t);
    cpu::OptimizerState opt;
    opt.drawStep = 3;
    opt.step = 1; // (the optimizer's step keys no draw)
    const double scalars[device::kStepScalars] = {1.0, 1.0, 3.0};
    runCpu(a, instr("uniform", {}, {yc}, attrs), &opt);
    runLowered(a, instr("uniform", {}, {yn}, attrs), scalars);
    opt.drawStep = 4;
    runCpu(a, instr("uniform", {}, {y2}, attrs), &opt);
    auto value = [&](const TensorRef &y, int64_t i) -> float {
      if (t == DType::F32)
        return a.at<float>(y)[i];
      uint16_t v = a.at<uint16_t>(y)[i];
      return t == DType::BF16 ? floatFromBf16(v) : floatFromF16(v);
    };
    float unit = t == DType::F32    ? 0x1p-24f
                 : t == DType::BF16 ? 0x1p-8f
                                    : 0x1p-11f;
    double sum = 0;
    int64_t same = 0;
    for (int64_t i = 0; i < n; ++i) {
      float u = value(yc, i);
      ASSERT_EQ(u, value(yn, i)) << "element " << i;
      ASSERT_TRUE(u >= 0.0f && u < 1.0f) << u;
      ASSERT_EQ(u / unit, std::floor(u / unit))
          << u << " is no multiple of " << unit;
      sum += u;
      same += u == value(y2, i);
    }
    EXPECT_NEAR(sum / n, 0.5, 6 * std::sqrt(1.0 / 12 / n));
    EXPECT_LT(same, n / 50) << "step 4 drew step 3's values";
  }
}

TEST(DeviceKernels, ReduceMaxPropagatesNan) {
  for (Dims axes : {Dims{2}, Dims{0}, Dims{1}, Dims{0, 2}, Dims{0, 1, 2}}) {
    Arena a;
    Dims in = {6, 5, 4}, out;
    for (int64_t d = 0; d < 3; ++d)
      if (std::find(axes.begin(), axes.end(), d) == axes.end())
        out.push_back(in[d]);
    if (out.empty())
      out = {1};
    TensorRef x = a.add(in), yc = a.add(out), yn = a.add(out);
    a.fill(x, -2.0f, 2.0f);
    const int64_t poisoned = 2 * 20 + 3 * 4 + 1; // element [2, 3, 1]
    a.at<float>(x)[poisoned] = std::nanf("");
    nlohmann::json attrs = {{"axes", axes}, {"keepdims", false}};
    runLowered(a, instr("reduce_max", {x}, {yn}, attrs));
    runCpu(a, instr("reduce_max", {x}, {yc}, attrs));
    int64_t nans = 0;
    for (int64_t i = 0; i < yc.numel(); ++i) {
      float cpu = a.at<float>(yc)[i], lowered = a.at<float>(yn)[i];
      ASSERT_EQ(std::isnan(cpu), std::isnan(lowered)) << "output " << i;
      nans += std::isnan(cpu);
      if (!std::isnan(cpu))
        ASSERT_EQ(cpu, lowered) << "output " << i;
    }
    ASSERT_EQ(nans, 1) << "one output reduces over the NaN (axes of "
                       << axes.size() << ")";
  }
}

TEST(DeviceKernels, SoftmaxAndLayerNormMatchCpu) {
  for (bool log : {false, true})
    for (int64_t axis : {1, 2}) {
      Arena a;
      Dims shape = {2, 5, 3};
      TensorRef x = a.add(shape), y = a.add(shape);
      a.fill(x, -4.0f, 4.0f);
      int64_t len = shape[axis], inner = axis == 1 ? 3 : 1;
      std::vector<float> got(y.numel());
      runOnHost(x.numel() / len,
                SoftmaxRows{len, inner, log, a.at<float>(x), got.data()});
      runCpu(a, instr(log ? "log_softmax" : "softmax", {x}, {y},
                      {{"axis", axis}}));
      expectClose(a.at<float>(y), got.data(), y.numel(),
                  log ? "log_softmax" : "softmax");
    }
  for (bool bias : {false, true}) {
    Arena a;
    TensorRef x = a.add({6, 16}), w = a.add({16}), b = a.add({16}),
              y = a.add({6, 16});
    a.fill(x, -2.0f, 3.0f);
    a.fill(w, 0.5f, 1.5f);
    a.fill(b, -0.5f, 0.5f);
    std::vector<float> got(y.numel());
    runHost(6, LayerNormRows{16, 1e-5, a.at<float>(x), a.at<float>(w),
                             bias ? a.at<float>(b) : nullptr, got.data()});
    std::vector<TensorRef> ins = {x, w};
    if (bias)
      ins.push_back(b);
    runCpu(a, instr("layer_norm", ins, {y}, {{"axis", 1}, {"epsilon", 1e-5}}));
    expectClose(a.at<float>(y), got.data(), y.numel(), "layer_norm");
  }
}

TEST(DeviceKernels, GeluGradMatchesCpu) {
  for (bool tanhApprox : {false, true}) {
    Arena a;
    TensorRef x = a.add({7, 13}), g = a.add({7, 13}), y = a.add({7, 13});
    a.fill(x, -4.0f, 4.0f);
    a.fill(g, -2.0f, 2.0f);
    std::vector<float> got(y.numel());
    runOnHost(y.numel(),
              GeluGrad{tanhApprox, a.at<float>(x), a.at<float>(g), got.data()});
    nlohmann::json attrs = nlohmann::json::object();
    if (tanhApprox)
      attrs["approximate"] = "tanh";
    runCpu(a, instr("gelu_grad", {x, g}, {y}, attrs));
    // g (cdf(x) + x pdf(x)) cancels for negative x: within roundings of
    // g (1 + |x|).
    std::vector<float> scale(y.numel());
    for (int64_t i = 0; i < y.numel(); ++i)
      scale[i] = a.at<float>(g)[i] * (1 + std::fabs(a.at<float>(x)[i]));
    expectCloseScaled(a.at<float>(y), got.data(), y.numel(), scale,
                      "gelu_grad");
  }
}

TEST(DeviceKernels, LayerNormGradMatchesCpu) {
  // Normalising the last axis, and the last two (rows of 3 * 8).
  for (int64_t axis : {2, 1}) {
    Arena a;
    Dims shape = {2, 3, 8}, norm(shape.begin() + axis, shape.end());
    TensorRef x = a.add(shape), w = a.add(norm), g = a.add(shape),
              dx = a.add(shape), dw = a.add(norm), db = a.add(norm);
    a.fill(x, -2.0f, 3.0f);
    a.fill(w, 0.5f, 1.5f);
    a.fill(g, -1.0f, 1.0f);
    int64_t cols = w.numel(), rows = x.numel() / cols;
    std::vector<float> gotDx(x.numel()), gotDw(cols), gotDb(cols);
    std::vector<double> stats(2 * rows);
    runHost(rows,
            LayerNormGradRows{cols, 1e-5, a.at<float>(x), a.at<float>(w),
                              a.at<float>(g), gotDx.data(), stats.data()});
    runHost(cols, LayerNormGradCols{rows, cols, a.at<float>(x), a.at<float>(g),
                                    stats.data(), gotDw.data(), gotDb.data()});
    runCpu(a, instr("layer_norm_grad", {x, w, g}, {dx, dw, db},
                    {{"axis", axis}, {"epsilon", 1e-5}}));
    expectClose(a.at<float>(dx), gotDx.data(), x.numel(), "dx");
    expectClose(a.at<float>(dw), gotDw.data(), cols, "dscale");
    expectClose(a.at<float>(db), gotDb.data(), cols, "dbias");
  }
}

// Enough rows (256) that the scale's and bias's gradients split into
// chunks (8 of 32 rows), as lowered.
TEST(DeviceKernels, SplitLayerNormGradMatchesCpu) {
  Arena a;
  Dims shape = {8, 32, 48}, norm = {48};
  TensorRef x = a.add(shape), w = a.add(norm), g = a.add(shape),
            dx = a.add(shape), dw = a.add(norm), db = a.add(norm),
            gotDx = a.add(shape), gotDw = a.add(norm), gotDb = a.add(norm);
  a.fill(x, -2.0f, 3.0f);
  a.fill(w, 0.5f, 1.5f);
  a.fill(g, -1.0f, 1.0f);
  nlohmann::json attrs = {{"axis", 2}, {"epsilon", 1e-5}};
  runLowered(a,
             instr("layer_norm_grad", {x, w, g}, {gotDx, gotDw, gotDb}, attrs));
  runCpu(a, instr("layer_norm_grad", {x, w, g}, {dx, dw, db}, attrs));
  expectClose(a.at<float>(dx), a.at<float>(gotDx), x.numel(), "dx");
  expectClose(a.at<float>(dw), a.at<float>(gotDw), 48, "dscale");
  expectClose(a.at<float>(db), a.at<float>(gotDb), 48, "dbias");
}

// rms_norm and its gradient, lowered, against the CPU kernels, and the
// forward against x / sqrt(mean(x²) + eps) · w written out here; enough
// rows (256) that dscale's sums split into chunks.
TEST(DeviceKernels, RmsNormMatchesCpu) {
  Arena a;
  Dims shape = {8, 32, 48}, norm = {48};
  TensorRef x = a.add(shape), w = a.add(norm), g = a.add(shape),
            y = a.add(shape), gotY = a.add(shape), dx = a.add(shape),
            dw = a.add(norm), gotDx = a.add(shape), gotDw = a.add(norm);
  a.fill(x, -2.0f, 3.0f);
  a.fill(w, 0.5f, 1.5f);
  a.fill(g, -1.0f, 1.0f);
  nlohmann::json attrs = {{"axis", 2}, {"epsilon", 1e-5}};
  runLowered(a, instr("rms_norm", {x, w}, {gotY}, attrs));
  runCpu(a, instr("rms_norm", {x, w}, {y}, attrs));
  expectClose(a.at<float>(y), a.at<float>(gotY), y.numel(), "rms_norm");
  std::vector<float> want(y.numel());
  const float *px = a.at<float>(x), *pw = a.at<float>(w);
  for (int64_t r = 0; r < 256; ++r) {
    double ms = 0;
    for (int64_t j = 0; j < 48; ++j)
      ms += double(px[r * 48 + j]) * px[r * 48 + j];
    double scale = 1.0 / std::sqrt(ms / 48 + 1e-5);
    for (int64_t j = 0; j < 48; ++j)
      want[r * 48 + j] = float(px[r * 48 + j] * scale * pw[j]);
  }
  expectClose(a.at<float>(y), want.data(), y.numel(), "rms_norm (formula)");
  runLowered(a, instr("rms_norm_grad", {x, w, g}, {gotDx, gotDw}, attrs));
  runCpu(a, instr("rms_norm_grad", {x, w, g}, {dx, dw}, attrs));
  expectClose(a.at<float>(dx), a.at<float>(gotDx), x.numel(), "dx");
  expectClose(a.at<float>(dw), a.at<float>(gotDw), 48, "dscale");
}

TEST(DeviceKernels, GatherAndScatterAddMatchCpu) {
  Arena a;
  TensorRef table = a.add({10, 4}), idx = a.add({5}, DType::I64),
            rows = a.add({5, 4}), dest = a.add({10, 4}),
            summed = a.add({10, 4});
  a.fill(table, -1.0f, 1.0f);
  a.fill(dest, -1.0f, 1.0f);
  a.fillInts(idx, {3, -1, 0, 3, 7}); // a repeat and a negative index
  std::vector<float> gathered(rows.numel());
  int error = 0;
  runOnHost(rows.numel(),
            Gather{10, 4, 5, 4, a.at<uint8_t>(table), a.at<int64_t>(idx),
                   reinterpret_cast<uint8_t *>(gathered.data()), &error});
  EXPECT_EQ(error, 0);
  runCpu(a, instr("gather", {table, idx}, {rows}, {{"axis", 0}}));
  expectClose(a.at<float>(rows), gathered.data(), rows.numel(), "gather");

  std::vector<float> scattered(a.at<float>(dest),
                               a.at<float>(dest) + dest.numel());
  runOnHost(rows.numel(),
            ScatterAdd{10, 4, 5, a.at<float>(rows), a.at<int64_t>(idx),
                       scattered.data(), &error});
  EXPECT_EQ(error, 0);
  runCpu(a, instr("scatter_add", {dest, idx, rows}, {summed}, {{"axis", 0}}));
  expectClose(a.at<float>(summed), scattered.data(), summed.numel(),
              "scatter_add");

  // An index out of range is flagged, not followed.
  a.fillInts(idx, {3, 10});
  runOnHost(rows.numel(),
            Gather{10, 4, 5, 4, a.at<uint8_t>(table), a.at<int64_t>(idx),
                   reinterpret_cast<uint8_t *>(gathered.data()), &error});
  EXPECT_EQ(error, kIndexOutOfRange);
}

// fsdp.argsort: the CPU kernel (std::sort) and the lowered device kernel
// (each element counts the ones before it) give one permutation, the
// stable sort torch.sort gives: ties in their original order, NaN last
// ascending and first descending.
TEST(DeviceKernels, ArgsortMatchesCpuAndStableOrder) {
  Arena a;
  TensorRef x = a.add({2, 7, 3}), cpuOut = a.add({2, 7, 3}, DType::I64),
            devOut = a.add({2, 7, 3}, DType::I64);
  a.fill(x, -1.0f, 1.0f);
  float *px = a.at<float>(x);
  px[0 * 21 + 2 * 3 + 1] = px[0 * 21 + 5 * 3 + 1]; // a tie along axis 1
  px[1 * 21 + 3 * 3 + 0] = NAN;
  px[1 * 21 + 6 * 3 + 0] = NAN; // two NaNs in one row
  px[1 * 21 + 1 * 3 + 2] = -0.0f;
  px[1 * 21 + 4 * 3 + 2] = 0.0f; // -0 and 0 are equal
  for (bool descending : {false, true}) {
    nlohmann::json attrs = {{"axis", 1}, {"descending", descending}};
    runCpu(a, instr("argsort", {x}, {cpuOut}, attrs));
    runLowered(a, instr("argsort", {x}, {devOut}, attrs));
    for (int64_t o = 0; o < 2; ++o)
      for (int64_t t = 0; t < 3; ++t) {
        std::vector<int64_t> want(7);
        for (int64_t j = 0; j < 7; ++j)
          want[j] = j;
        auto key = [&](int64_t j) { return px[o * 21 + j * 3 + t]; };
        std::stable_sort(want.begin(), want.end(), [&](int64_t i, int64_t j) {
          float u = key(i), v = key(j);
          if (std::isnan(u) || std::isnan(v))
            return descending ? (std::isnan(u) && !std::isnan(v))
                              : (!std::isnan(u) && std::isnan(v));
          return descending ? u > v : u < v;
        });
        for (int64_t j = 0; j < 7; ++j) {
          int64_t at = o * 21 + j * 3 + t;
          EXPECT_EQ(a.at<int64_t>(cpuOut)[at], want[j])
              << "cpu, descending " << descending << " row " << o << "," << t;
          EXPECT_EQ(a.at<int64_t>(devOut)[at], want[j])
              << "device, descending " << descending << " row " << o << ","
              << t;
        }
      }
  }
}
