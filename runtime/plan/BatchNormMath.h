//===- BatchNormMath.h - Batch normalisation, one channel at a time -*- C++ -*-===//
//
// Header-only and dependency-free: the CPU kernels and the device functors
// of fsdp.batch_norm and fsdp.batch_norm_grad run these same steps, one
// channel of x [N, C, S...] per call (statistics in double, two passes).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_PLAN_BATCHNORMMATH_H
#define FSDP_RUNTIME_PLAN_BATCHNORMMATH_H

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

/// The channel's mean and 1 / sqrt(biased variance + eps), from `load`,
/// and the biased variance in `*var`.
template <typename Load>
FSDP_BN_HD void batchNormStats(const BatchNormLayout &l, int64_t ch, double eps,
                               Load load, double *mean, double *invstd,
                               double *var) {
  int64_t m = l.count();
  double sum = 0;
  for (int64_t k = 0; k < m; ++k)
    sum += load(l.at(ch, k));
  double mu = m ? sum / m : 0.0, sq = 0;
  for (int64_t k = 0; k < m; ++k) {
    double d = load(l.at(ch, k)) - mu;
    sq += d * d;
  }
  double v = m ? sq / m : 0.0;
  *mean = mu;
  *var = v;
  *invstd = 1.0 / sqrt(v + eps);
}

/// Forward of one channel: y = (x - mean) · invstd · scale + bias; the
/// batch mean and biased variance into `stats(mean, var)`.
template <typename Load, typename Store, typename Stats>
FSDP_BN_HD void batchNormChannel(const BatchNormLayout &l, int64_t ch,
                                 double eps, float scale, float bias, Load load,
                                 Store store, Stats stats) {
  double mean, invstd, var;
  batchNormStats(l, ch, eps, load, &mean, &invstd, &var);
  for (int64_t k = 0; k < l.count(); ++k) {
    int64_t i = l.at(ch, k);
    store(i, (float)((load(i) - mean) * invstd * scale + bias));
  }
  stats(mean, var);
}

/// Backward of one channel: with x̂ = (x - mean)·invstd, dbias = Σ dy,
/// dscale = Σ dy·x̂, dx = scale·invstd·(dy - dbias/M - x̂·dscale/M).
template <typename LoadX, typename LoadDy, typename Store, typename Params>
FSDP_BN_HD void batchNormGradChannel(const BatchNormLayout &l, int64_t ch,
                                     double eps, float scale, LoadX loadX,
                                     LoadDy loadDy, Store storeDx,
                                     Params grads) {
  double mean, invstd, var;
  batchNormStats(l, ch, eps, loadX, &mean, &invstd, &var);
  int64_t m = l.count();
  double sumDy = 0, sumDyXhat = 0;
  for (int64_t k = 0; k < m; ++k) {
    int64_t i = l.at(ch, k);
    double dy = loadDy(i);
    sumDy += dy;
    sumDyXhat += dy * (loadX(i) - mean) * invstd;
  }
  for (int64_t k = 0; k < m; ++k) {
    int64_t i = l.at(ch, k);
    double xhat = (loadX(i) - mean) * invstd;
    storeDx(i, (float)(scale * invstd *
                       (loadDy(i) - sumDy / m - xhat * sumDyXhat / m)));
  }
  grads(sumDyXhat, sumDy); // dscale, dbias
}

} // namespace fsdp

#endif // FSDP_RUNTIME_PLAN_BATCHNORMMATH_H
