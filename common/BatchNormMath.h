//===- BatchNormMath.h - Batch normalisation, one channel at a time -*- C++ -*-===//
//
// Header-only and dependency-free: the CPU kernels and the device functors
// of fsdp.batch_norm and fsdp.batch_norm_grad run these same steps, one
// channel of x [N, C, S...] per call (statistics in double, two passes).
// Synchronised (SyncBatchNorm): the per-channel sums of batchNormSum,
// batchNormSquares and batchNormGradSums are summed over the ranks between
// the steps, and M counts every rank's values.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_COMMON_BATCHNORMMATH_H
#define FSDP_COMMON_BATCHNORMMATH_H

#include <cmath>
#include <cstdint>

#ifdef __CUDACC__
#define FSDP_BN_HD __host__ __device__
#else
#define FSDP_BN_HD
#endif

namespace fsdp {

/// x [n, c, s] (s: the spatial extents' product).
struct BatchNormLayout {
  int64_t n = 0, c = 0, s = 1;
  FSDP_BN_HD int64_t count() const { return n * s; }
  FSDP_BN_HD int64_t at(int64_t ch, int64_t k) const {
    return ((k / s) * c + ch) * s + k % s;
  }
};

/// The unbiased variance the running statistics take, from the sum of
/// squared deviations of `total` values (with one value, that sum: 0).
FSDP_BN_HD inline double batchNormUnbiased(double sq, int64_t total) {
  return total > 1 ? sq / double(total - 1) : sq;
}

/// One channel's sum of x.
template <typename Load>
FSDP_BN_HD double batchNormSum(const BatchNormLayout &l, int64_t ch,
                               Load load) {
  double sum = 0;
  for (int64_t k = 0; k < l.count(); ++k)
    sum += load(l.at(ch, k));
  return sum;
}

/// One channel's sum of (x - mean)².
template <typename Load>
FSDP_BN_HD double batchNormSquares(const BatchNormLayout &l, int64_t ch,
                                   double mean, Load load) {
  double sq = 0;
  for (int64_t k = 0; k < l.count(); ++k) {
    double d = load(l.at(ch, k)) - mean;
    sq += d * d;
  }
  return sq;
}

/// y = (x - mean) · invstd · scale + bias over one channel.
template <typename Load, typename Store>
FSDP_BN_HD void batchNormApply(const BatchNormLayout &l, int64_t ch,
                               double mean, double invstd, float scale,
                               float bias, Load load, Store store) {
  for (int64_t k = 0; k < l.count(); ++k) {
    int64_t i = l.at(ch, k);
    store(i, (float)((load(i) - mean) * invstd * scale + bias));
  }
}

/// One channel's Σ dy and Σ dy·x̂, x̂ = (x - mean)·invstd.
template <typename LoadX, typename LoadDy>
FSDP_BN_HD void batchNormGradSums(const BatchNormLayout &l, int64_t ch,
                                  double mean, double invstd, LoadX loadX,
                                  LoadDy loadDy, double *sumDy,
                                  double *sumDyXhat) {
  double a = 0, b = 0;
  for (int64_t k = 0; k < l.count(); ++k) {
    int64_t i = l.at(ch, k);
    double dy = loadDy(i);
    a += dy;
    b += dy * (loadX(i) - mean) * invstd;
  }
  *sumDy = a;
  *sumDyXhat = b;
}

/// dx = scale·invstd·(dy - Σdy/M - x̂·Σdy·x̂/M) over one channel, the sums
/// and M = `total` over every value normalised together.
template <typename LoadX, typename LoadDy, typename Store>
FSDP_BN_HD void batchNormGradApply(const BatchNormLayout &l, int64_t ch,
                                   double mean, double invstd, float scale,
                                   double sumDy, double sumDyXhat,
                                   int64_t total, LoadX loadX, LoadDy loadDy,
                                   Store storeDx) {
  for (int64_t k = 0; k < l.count(); ++k) {
    int64_t i = l.at(ch, k);
    double xhat = (loadX(i) - mean) * invstd;
    storeDx(i, (float)(scale * invstd *
                       (loadDy(i) - sumDy / total - xhat * sumDyXhat / total)));
  }
}

/// Forward of one channel normalised on its own: y = (x - mean) · invstd ·
/// scale + bias; the batch mean and unbiased variance into
/// `stats(mean, var)`.
template <typename Load, typename Store, typename Stats>
FSDP_BN_HD void batchNormChannel(const BatchNormLayout &l, int64_t ch,
                                 double eps, float scale, float bias, Load load,
                                 Store store, Stats stats) {
  int64_t m = l.count();
  double mean = m ? batchNormSum(l, ch, load) / m : 0.0;
  double sq = batchNormSquares(l, ch, mean, load);
  double invstd = 1.0 / sqrt((m ? sq / m : 0.0) + eps);
  batchNormApply(l, ch, mean, invstd, scale, bias, load, store);
  stats(mean, batchNormUnbiased(sq, m));
}

/// Backward of one channel normalised on its own: dbias = Σ dy, dscale =
/// Σ dy·x̂, dx as batchNormGradApply.
template <typename LoadX, typename LoadDy, typename Store, typename Params>
FSDP_BN_HD void batchNormGradChannel(const BatchNormLayout &l, int64_t ch,
                                     double eps, float scale, LoadX loadX,
                                     LoadDy loadDy, Store storeDx,
                                     Params grads) {
  int64_t m = l.count();
  double mean = m ? batchNormSum(l, ch, loadX) / m : 0.0;
  double sq = batchNormSquares(l, ch, mean, loadX);
  double invstd = 1.0 / sqrt((m ? sq / m : 0.0) + eps);
  double sumDy, sumDyXhat;
  batchNormGradSums(l, ch, mean, invstd, loadX, loadDy, &sumDy, &sumDyXhat);
  batchNormGradApply(l, ch, mean, invstd, scale, sumDy, sumDyXhat, m, loadX,
                     loadDy, storeDx);
  grads(sumDyXhat, sumDy); // dscale, dbias
}

/// The steps of a synchronised batch norm (SyncBatchNorm), each run for
/// every channel, with `red` [8, C] floats all-reduced over the ranks
/// between them: Sum (sum 0 = Σx), Squares (sum 1 = Σ(x - mean)²), Apply
/// (y; `stats(mean, unbiased variance)`) forward; Sum, Squares, GradSums
/// (`stats(dscale, dbias)`, this rank's; sums 2, 3 = Σdy, Σdy·x̂), GradApply
/// (dx) backward. `total` counts a channel's values over every rank.
///
/// Each sum travels as two floats (batchNormPutSum): a rank's double sum
/// rounded to float, and what that rounding dropped. Σdy of the ranks
/// nearly cancels (its parts are 1000x the total and more): rounded to one
/// float each, the total kept 3 digits, and ReLU's kinks turned that into
/// gradients 0.3% off on resnet18. Split in two, the rounded parts add up
/// exactly where they cancel (Sterbenz) and the remainders carry the rest.
enum class BatchNormStep { Sum, Squares, Apply, GradSums, GradApply };

/// The floats of `red` that `step` writes, all-reduced after it: `*count`
/// of them from `*first` (0: none).
inline void batchNormStepSums(BatchNormStep step, int64_t c, int64_t *first,
                              int64_t *count) {
  *first = step == BatchNormStep::Sum       ? 0
           : step == BatchNormStep::Squares ? 2 * c
                                            : 4 * c;
  *count = step == BatchNormStep::GradSums ? 4 * c
           : step == BatchNormStep::Sum || step == BatchNormStep::Squares
               ? 2 * c
               : 0;
}

/// Sum `k` of channel `ch` into `red` as a float and its remainder.
FSDP_BN_HD inline void batchNormPutSum(float *red, int64_t c, int k,
                                       int64_t ch, double v) {
  float hi = (float)v;
  red[2 * k * c + ch] = hi;
  red[(2 * k + 1) * c + ch] = (float)(v - (double)hi);
}

/// Sum `k` of channel `ch` back from `red` (after the all-reduce).
FSDP_BN_HD inline double batchNormGetSum(const float *red, int64_t c, int k,
                                         int64_t ch) {
  return (double)red[2 * k * c + ch] + (double)red[(2 * k + 1) * c + ch];
}

template <typename LoadX, typename LoadDy, typename Store, typename Stats>
FSDP_BN_HD void batchNormSyncedStep(BatchNormStep step,
                                    const BatchNormLayout &l, int64_t ch,
                                    double eps, int64_t total, float scale,
                                    float bias, LoadX loadX, LoadDy loadDy,
                                    Store store, Stats stats, float *red) {
  int64_t c = l.c;
  if (step == BatchNormStep::Sum) {
    batchNormPutSum(red, c, 0, ch, batchNormSum(l, ch, loadX));
    return;
  }
  double mean = batchNormGetSum(red, c, 0, ch) / (double)total;
  if (step == BatchNormStep::Squares) {
    batchNormPutSum(red, c, 1, ch, batchNormSquares(l, ch, mean, loadX));
    return;
  }
  double sq = batchNormGetSum(red, c, 1, ch);
  double invstd = 1.0 / sqrt(sq / (double)total + eps);
  if (step == BatchNormStep::Apply) {
    batchNormApply(l, ch, mean, invstd, scale, bias, loadX, store);
    stats(mean, batchNormUnbiased(sq, total));
  } else if (step == BatchNormStep::GradSums) {
    double sumDy, sumDyXhat;
    batchNormGradSums(l, ch, mean, invstd, loadX, loadDy, &sumDy, &sumDyXhat);
    stats(sumDyXhat, sumDy);
    batchNormPutSum(red, c, 2, ch, sumDy);
    batchNormPutSum(red, c, 3, ch, sumDyXhat);
  } else {
    batchNormGradApply(l, ch, mean, invstd, scale,
                       batchNormGetSum(red, c, 2, ch),
                       batchNormGetSum(red, c, 3, ch), total, loadX, loadDy,
                       store);
  }
}

} // namespace fsdp

#endif // FSDP_COMMON_BATCHNORMMATH_H
