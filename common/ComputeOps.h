//===- ComputeOps.h - The ops whose kernels compute in f32 ------*- C++ -*-===//
//
// Header-only and dependency-free: the runtime widens these ops' bf16/f16
// tensors to f32 copies (runtime/plan/Widen.h), and fsdp-simulate plans the
// memory those copies take.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_COMMON_COMPUTEOPS_H
#define FSDP_COMMON_COMPUTEOPS_H

#include "common/ConvGeometry.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace fsdp {

/// The compute-dtype rules of an op's row in common/Ops.def.
enum OpRule : unsigned {
  kOpF32 = 1,         // its kernels compute in f32
  kOpElementwise = 2, // elementwise (narrow values loaded and rounded exactly)
  kOpNarrowCpu = 4,   // the CPU kernel takes bf16/f16 as they are
  kOpNarrowDevice = 8 // the device kernels take bf16/f16 as they are
};

/// The OpRule bits of `op` (0 for an op without a row).
inline unsigned opRules(std::string_view op) {
  static const std::unordered_map<std::string_view, unsigned> rules = [] {
    // The rules' names in Ops.def's rows.
    constexpr unsigned F32 = kOpF32, EW = kOpElementwise, NC = kOpNarrowCpu,
                       ND = kOpNarrowDevice;
    std::unordered_map<std::string_view, unsigned> m;
#define FSDP_OP(name, cpu, device, minIn, maxIn, outs, r) m.emplace(name, r);
#include "common/Ops.def"
#undef FSDP_OP
    return m;
  }();
  auto it = rules.find(op);
  return it == rules.end() ? 0 : it->second;
}

/// Whether `op`'s kernels compute in f32 (and so need f32 operands); the
/// others only move bytes and take any dtype.
inline bool computesInF32(std::string_view op) {
  return opRules(op) & kOpF32;
}

/// The elementwise ops among them: the device kernels compute each
/// element in f32 from bf16/f16 operands as they load them and round the
/// result as they store it, which is exactly what the CPU's widened copies
/// give, element for element (a comparison's i1 result is exact either
/// way).
inline bool isElementwise(std::string_view op) {
  return opRules(op) & kOpElementwise;
}

/// An attention_grad's operands: q, k, v, dy, then the optional mask, then
/// the optional saved output and row log-sum-exp (the forward's with_lse):
/// whether each is there, from the operand count (4 to 7).
inline bool attentionGradHasMask(size_t operands) {
  return operands == 5 || operands == 7;
}
inline bool attentionGradHasSaved(size_t operands) { return operands >= 6; }

/// The shapes of an attention's or attention_grad's q, k and v (its first
/// three operands) seen in the "bhsd" layout, [..., H, T, D], whatever its
/// layout (`bshd`: [..., T, H, D]); the rules below read T at [r - 2].
inline std::vector<std::vector<int64_t>>
attentionAsBhsd(std::vector<std::vector<int64_t>> in, bool bshd) {
  for (size_t i = 0; bshd && i < 3 && i < in.size(); ++i)
    if (in[i].size() >= 3)
      std::swap(in[i][in[i].size() - 3], in[i][in[i].size() - 2]);
  return in;
}

/// Whether the device's flash-attention kernels (runtime/device/
/// FlashAttention.h) take an attention or attention_grad with operands of
/// these shapes (q, k, v[, dy[, out, lse]]; all bf16 or all f16 but lse):
/// no mask operand, one head size for q, k and v, a multiple of 16 up to
/// 128, and when `causal` no more queries than keys (every row sees a
/// key). Others run the simple kernels on f32 copies.
inline bool flashAttentionShapes(std::string_view op,
                                 std::vector<std::vector<int64_t>> in,
                                 bool causal, bool bshd = false) {
  in = attentionAsBhsd(std::move(in), bshd);
  bool fits = op == "attention" ? in.size() == 3
              : op == "attention_grad"
                  ? in.size() >= 4 && !attentionGradHasMask(in.size())
                  : false;
  if (!fits)
    return false;
  const std::vector<int64_t> &q = in[0], &k = in[1], &v = in[2];
  size_t r = q.size();
  if (r < 2 || k.size() != r || v.size() != r)
    return false;
  int64_t d = q[r - 1], tq = q[r - 2], tk = k[r - 2];
  return d > 0 && d % 16 == 0 && d <= 128 && k[r - 1] == d && v[r - 1] == d &&
         tq > 0 && tk > 0 && (!causal || tq <= tk);
}

/// Whether the device backends run `op` (its operands of shapes `in`,
/// attention's `causal`) on bf16/f16 tensors as they are (tensor-core
/// GEMMs; losses reading narrow logits; flash attention; elementwise ops,
/// layer norms and reductions, which load narrow values exactly and round
/// results as a cast of their f32 result would),
/// so a plan for a GPU needs no f32 copies for it; the CPU backend widens
/// every op above.
inline bool runsNarrowOnDevice(std::string_view op,
                               const std::vector<std::vector<int64_t>> &in,
                               bool causal, bool bshd = false) {
  if (op == "attention" || op == "attention_grad")
    return flashAttentionShapes(op, in, causal, bshd);
  return opRules(op) & kOpNarrowDevice;
}

/// Whether the CPU backend (cpu::runsNarrow) runs `op` on bf16/f16 tensors
/// as they are; `oneNarrowType`: all of its tensors have one such type,
/// `bf16`: that type is bf16. It does so for the elementwise ops its
/// kernels load and store in any float type (f32 math on the loaded
/// values, one rounding a result: the numerics of widened copies, element
/// for element), and for bf16 products where the CPU multiplies bf16
/// (`nativeBf16Products`: cpu/Gemm.h). Every other op of computesInF32
/// reads f32 copies of its narrow operands and writes an f32 result that
/// is then narrowed (runtime/plan/Widen.h).
inline bool runsNarrowOnCpu(std::string_view op, bool oneNarrowType, bool bf16,
                            bool nativeBf16Products) {
  if (!oneNarrowType)
    return false;
  if (op == "matmul")
    return bf16 && nativeBf16Products;
  return opRules(op) & kOpNarrowCpu;
}

/// Threads a split reduction aims for: a reduction into fewer outputs
/// (a bias's gradient: 768 sums of 16384 rows) splits each sum into
/// chunks, so chunks x outputs threads fill a GPU; the chunks' partial sums
/// (doubles, in scratch) are then combined in order.
constexpr int64_t kSplitReduceThreads = int64_t(1) << 18;

/// The chunks each of `outputs` sums of `count` elements splits into (1:
/// none); chunks x outputs <= kSplitReduceThreads.
inline int64_t reduceChunks(int64_t count, int64_t outputs) {
  if (outputs <= 0 || outputs * 2 > kSplitReduceThreads || count < 64)
    return 1;
  int64_t chunks = std::min(count / 32, kSplitReduceThreads / outputs);
  return std::max<int64_t>(chunks, 1);
}

/// Scratch bytes the device kernels of `op` need, given its operands'
/// shapes (runtime/device/Lowering.cpp lays them out; fsdp-simulate plans
/// them for GPU targets): per query row attention_grad's softmax max,
/// normaliser and D; per row layer_norm_grad's mean and rstd; per position
/// a loss's term and weight, plus the total and a sink; split reductions'
/// partial sums; a convolution's column buffer (4 bytes an element at
/// most), and for conv_grad_weight the output gradient regrouped by
/// channel. `out`: the results' shapes.
inline int64_t deviceScratchBytes(std::string_view op,
                                  const std::vector<std::vector<int64_t>> &in,
                                  const std::vector<std::vector<int64_t>> &out) {
  auto numel = [](const std::vector<int64_t> &s) {
    int64_t n = 1;
    for (int64_t d : s)
      n *= d;
    return n;
  };
  // lhs_sums: the reduce_sum the sums replaced, where no library fuses it.
  if (op == "matmul" && out.size() == 2 && !in.empty())
    return deviceScratchBytes("reduce_sum", {in[0]}, {out[1]});
  if (int64_t columns = convColumnElements(op, in, out)) {
    int64_t regrouped = op == "conv_grad_weight" ? numel(in[1]) : 0;
    return 4 * (columns + regrouped) + 16;
  }
  if (op == "attention_grad" && !in.empty() && in[0].size() >= 2 &&
      in[0].back() > 0)
    return 24 * (numel(in[0]) / in[0].back());
  // Split reductions: at most kSplitReduceThreads partial sums (two for
  // layer_norm_grad's dw and db), and one per 32 input elements at most
  // (reduceChunks' chunks are 32 elements or longer).
  int64_t partials =
      in.empty() ? 0 : std::min(numel(in[0]) / 32, kSplitReduceThreads);
  if ((op == "batch_norm" || op == "batch_norm_grad") && !in.empty() &&
      in[0].size() >= 2) // SyncBatchNorm's [8, C] sums (floats)
    return 32 * in[0][1];
  if ((op == "layer_norm_grad" || op == "rms_norm_grad") && in.size() == 3)
    return 16 * (numel(in[0]) / std::max<int64_t>(numel(in[1]), 1)) +
           16 * partials;
  if (op == "reduce_sum" || op == "reduce_mean" || op == "reduce_max" ||
      op == "sum_squares")
    return 8 * partials;
  bool loss = op == "cross_entropy" || op == "nll_loss" ||
              op == "cross_entropy_grad" || op == "cross_entropy_with_grad";
  if (!loss || in.size() < 2)
    return 0;
  return (2 * numel(in[1]) + 2) * 8;
}

/// Scratch floats the CPU kernels of `op` need, given its operands' and
/// results' shapes (cpu::scratchFloats sizes the executor's buffer with it
/// and fsdp-simulate plans it for CPU targets, so the two cannot drift):
/// reductions accumulate their outputs in double; SyncBatchNorm's [8, C]
/// sums (`syncGroupSize` > 0); layer_norm_grad's and rms_norm_grad's row
/// mean and rstd (doubles); one image's convolution columns; attention's
/// score rows per thread, twice for its gradient (probabilities and their
/// gradient).
inline int64_t cpuScratchFloats(std::string_view op,
                                const std::vector<std::vector<int64_t>> &in,
                                const std::vector<std::vector<int64_t>> &out,
                                int64_t syncGroupSize, int64_t threads,
                                bool bshd = false) {
  auto numel = [](const std::vector<int64_t> &s) {
    int64_t n = 1;
    for (int64_t d : s)
      n *= d;
    return n;
  };
  if ((op == "reduce_sum" || op == "reduce_mean" || op == "reduce_max") &&
      !out.empty())
    return 2 * numel(out[0]);
  if (op == "matmul" && out.size() == 2) // lhs_sums: a reduce_sum's
    return 2 * numel(out[1]);
  if ((op == "batch_norm" || op == "batch_norm_grad") && syncGroupSize > 0 &&
      !in.empty() && in[0].size() >= 2)
    return 8 * in[0][1];
  if ((op == "layer_norm_grad" || op == "rms_norm_grad") && in.size() == 3 &&
      !in[1].empty())
    return 4 * (numel(in[0]) / std::max<int64_t>(numel(in[1]), 1));
  if (op == "conv" || op == "conv_grad_input" || op == "conv_grad_weight")
    return convImageColumnElements(op, in, out);
  bool grad = op == "attention_grad";
  if ((op != "attention" && !grad) || in.size() < 2 || in[0].size() < 2 ||
      in[1].size() < 2)
    return 0;
  auto qk = attentionAsBhsd({in[0], in[1]}, bshd); // tq at [r-2], tk too
  return qk[0][qk[0].size() - 2] * qk[1][qk[1].size() - 2] * threads *
         (grad ? 2 : 1);
}

/// Bytes an f32 copy of `elements` takes in the widening buffer (each copy
/// starts at a 16-byte boundary).
inline long long widenedCopyBytes(long long elements) {
  return (std::max(elements * 4, 1LL) + 15) / 16 * 16;
}

} // namespace fsdp

#endif // FSDP_COMMON_COMPUTEOPS_H
