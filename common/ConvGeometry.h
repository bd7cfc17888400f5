//===- ConvGeometry.h - Index math of convolutions, shared -------*- C++ -*-===//
//
// Header-only and dependency-free: the CPU kernels (runtime/cpu) and the
// device functors (runtime/device, host and CUDA) lower fsdp.conv and its
// gradients to im2col, GEMMs and col2im with this one set of index rules,
// and the planners size the column buffer with convColumnElements.
//
// A 1-D convolution is a 2-D one of height 1. Column rows r run over a
// group's input channels and kernel positions (c·KH·KW + kh·KW + kw),
// columns over output positions p = oh·OW + ow.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_COMMON_CONVGEOMETRY_H
#define FSDP_COMMON_CONVGEOMETRY_H

#include <cmath>
#include <cstdint>
#include <string_view>
#include <vector>

#ifdef __CUDACC__
#define FSDP_CONV_HD __host__ __device__
#else
#define FSDP_CONV_HD
#endif

namespace fsdp {

struct ConvGeometry {
  int64_t n = 0, c = 0, h = 1, w = 1; // input [N, C, H, W]
  int64_t oc = 0, kh = 1, kw = 1;     // weight [OC, C / groups, KH, KW]
  int64_t oh = 1, ow = 1;             // output [N, OC, OH, OW]
  int64_t sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1, groups = 1;
  int64_t phEnd = 0, pwEnd = 0; // pads after (average pooling's divisor)

  FSDP_CONV_HD int64_t cg() const { return c / groups; }
  FSDP_CONV_HD int64_t ocg() const { return oc / groups; }
  /// Column rows of a group: its input channels times kernel positions.
  FSDP_CONV_HD int64_t rows() const { return cg() * kh * kw; }
  /// Output positions of one image.
  FSDP_CONV_HD int64_t positions() const { return oh * ow; }

  /// The input element that column row `r` of group `g` reads at output
  /// position `p` of image `img` (an offset into x), or -1 in the padding.
  FSDP_CONV_HD int64_t source(int64_t img, int64_t g, int64_t r,
                              int64_t p) const {
    int64_t ch = g * cg() + r / (kh * kw), k = r % (kh * kw);
    int64_t ih = (p / ow) * sh - ph + (k / kw) * dh;
    int64_t iw = (p % ow) * sw - pw + (k % kw) * dw;
    if (ih < 0 || ih >= h || iw < 0 || iw >= w)
      return -1;
    return ((img * c + ch) * h + ih) * w + iw;
  }

  /// Calls f(g, r, p) for every column entry that reads input element
  /// (img, ch, ih, iw): col2im gathers a gradient from them, kernel rows
  /// then columns in order, so both backends sum in one order.
  template <typename F>
  FSDP_CONV_HD void forEachReader(int64_t ch, int64_t ih, int64_t iw,
                                  F f) const {
    int64_t g = ch / cg(), base = (ch % cg()) * kh * kw;
    for (int64_t i = 0; i < kh; ++i) {
      int64_t th = ih + ph - i * dh;
      if (th < 0 || th % sh != 0 || th / sh >= oh)
        continue;
      for (int64_t j = 0; j < kw; ++j) {
        int64_t tw = iw + pw - j * dw;
        if (tw < 0 || tw % sw != 0 || tw / sw >= ow)
          continue;
        f(g, base + i * kw + j, (th / sh) * ow + tw / sw);
      }
    }
  }
};

/// The number of windows along one spatial axis: of `kernel` positions
/// `dilation` apart, `stride` apart, over an input of extent `in` padded
/// by `padBegin` and `padEnd`. It rounds down, or up with `ceilMode`
/// (pooling), dropping a last window that would start in the end padding,
/// as PyTorch and ONNX do. -1 when no window fits or a setting is invalid.
inline int64_t windowExtent(int64_t in, int64_t kernel, int64_t stride,
                            int64_t padBegin, int64_t padEnd, int64_t dilation,
                            bool ceilMode = false) {
  if (in < 0 || kernel < 1 || stride < 1 || dilation < 1 || padBegin < 0 ||
      padEnd < 0)
    return -1;
  int64_t span = in + padBegin + padEnd - dilation * (kernel - 1) - 1;
  if (span < 0)
    return -1;
  int64_t o = span / stride + 1;
  if (ceilMode && span % stride != 0) {
    ++o;
    if ((o - 1) * stride >= in + padBegin)
      --o;
  }
  return o;
}

/// Spatial axis `d` of `s` (1 or 2) of x [N, C, *S]: a 1-D convolution is
/// a 2-D one of height 1, its one axis the width. Checks that `y`'s
/// extent is the window count and records the axis in `g`.
template <typename S, typename A>
bool setConvAxis(ConvGeometry &g, size_t d, size_t s, const S &x, int64_t k,
                 const S &y, const A &strides, const A &pads,
                 const A &dilations, bool ceilMode) {
  int64_t o = windowExtent(x[2 + d], k, strides[d], pads[d], pads[d + s],
                           dilations[d], ceilMode);
  if (o < 0 || o != y[2 + d])
    return false;
  bool height = s == 2 && d == 0;
  (height ? g.h : g.w) = x[2 + d];
  (height ? g.kh : g.kw) = k;
  (height ? g.oh : g.ow) = o;
  (height ? g.sh : g.sw) = strides[d];
  (height ? g.ph : g.pw) = pads[d];
  (height ? g.phEnd : g.pwEnd) = pads[d + s];
  (height ? g.dh : g.dw) = dilations[d];
  return true;
}

/// The geometry of a convolution from its input, weight and output shapes
/// and attributes (any sequences with size() and [], so a kernel inside a
/// step allocates nothing); false when they do not fit together.
template <typename S, typename A>
bool convGeometry(const S &x, const S &wt, const S &y, const A &strides,
                  const A &pads, const A &dilations, int64_t groups,
                  ConvGeometry &g) {
  size_t r = x.size();
  if ((r != 3 && r != 4) || wt.size() != r || y.size() != r)
    return false;
  size_t s = r - 2;
  if (strides.size() != s || dilations.size() != s || pads.size() != 2 * s)
    return false;
  g = ConvGeometry();
  g.n = x[0];
  g.c = x[1];
  g.oc = wt[0];
  g.groups = groups;
  if (g.n < 0 || g.c < 0 || g.oc < 0 || groups < 1 || g.c % groups ||
      g.oc % groups || wt[1] * groups != g.c || y[0] != g.n || y[1] != g.oc)
    return false;
  for (size_t d = 0; d < s; ++d)
    if (!setConvAxis(g, d, s, x, wt[2 + d], y, strides, pads, dilations,
                     false))
      return false;
  return true;
}

/// Pooling as a depthwise convolution of a kernel of ones: groups = C = OC,
/// one column row per kernel position. `x` and `y` are [N, C, *S] and
/// [N, C, *O]; the output extent rounds up with `ceilMode`.
template <typename S, typename A>
bool poolGeometry(const S &x, const S &y, const A &kernel, const A &strides,
                  const A &pads, const A &dilations, bool ceilMode,
                  ConvGeometry &g) {
  size_t r = x.size(), s = r - 2;
  if ((r != 3 && r != 4) || y.size() != r || kernel.size() != s ||
      strides.size() != s || dilations.size() != s || pads.size() != 2 * s ||
      y[0] != x[0] || y[1] != x[1] || x[0] < 0 || x[1] < 0)
    return false;
  g = ConvGeometry();
  g.n = x[0];
  g.c = g.oc = g.groups = x[1];
  for (size_t d = 0; d < s; ++d)
    if (!setConvAxis(g, d, s, x, kernel[d], y, strides, pads, dilations,
                     ceilMode))
      return false;
  return true;
}

/// The divisor of average pooling's window at output position `p`: its
/// positions inside the input, or with `includePad` those inside the
/// padded input (a ceil-mode window may reach past both).
FSDP_CONV_HD inline int64_t poolCount(const ConvGeometry &g, bool includePad,
                                      int64_t p) {
  int64_t count = 0;
  for (int64_t r = 0; r < g.kh * g.kw; ++r) {
    int64_t ih = (p / g.ow) * g.sh - g.ph + (r / g.kw) * g.dh;
    int64_t iw = (p % g.ow) * g.sw - g.pw + (r % g.kw) * g.dw;
    bool inside = ih >= 0 && ih < g.h && iw >= 0 && iw < g.w;
    bool padded = ih < g.h + g.phEnd && iw < g.w + g.pwEnd;
    count += includePad ? padded : inside;
  }
  return count;
}

/// One pooling window's result: the maximum (the first in scan order; a
/// NaN wins, as in PyTorch) with its kernel row in `*arg`, or the mean
/// (poolCount's divisor). `load(offset)` reads x as float. The window of
/// image `img`, channel `ch`, output position `p`.
template <typename Load>
FSDP_CONV_HD float poolWindow(const ConvGeometry &g, bool max, bool includePad,
                              int64_t img, int64_t ch, int64_t p, Load load,
                              int64_t *arg) {
  int64_t best = -1;
  float acc = 0.0f;
  for (int64_t r = 0; r < g.kh * g.kw; ++r) {
    int64_t s = g.source(img, ch, r, p);
    if (s < 0)
      continue; // padding: -inf for the maximum, 0 for the sum
    float v = load(s);
    if (!max) {
      acc += v;
    } else if (best < 0 || (acc == acc && (v > acc || v != v))) {
      acc = v;
      best = r;
    }
  }
  if (arg)
    *arg = best;
  if (max)
    return best < 0 ? -INFINITY : acc;
  int64_t count = poolCount(g, includePad, p);
  return count ? acc / (float)count : 0.0f;
}

/// d(input element (img, ch, ih, iw)) of a pooling: the output gradients
/// of the windows that take it (max: whose maximum it is; average: over
/// the window's divisor), summed in ConvGeometry::forEachReader's order.
/// `loadX`, `loadDy`: readers of x and dy by offset.
template <typename LoadX, typename LoadDy>
FSDP_CONV_HD float poolInputGrad(const ConvGeometry &g, bool max,
                                 bool includePad, int64_t img, int64_t ch,
                                 int64_t ih, int64_t iw, LoadX loadX,
                                 LoadDy loadDy) {
  float sum = 0.0f;
  int64_t plane = g.positions();
  g.forEachReader(ch, ih, iw, [&](int64_t, int64_t r, int64_t p) {
    float dy = loadDy((img * g.c + ch) * plane + p);
    if (max) {
      int64_t arg = -1;
      poolWindow(g, true, false, img, ch, p, loadX, &arg);
      if (arg == r)
        sum += dy;
    } else {
      sum += dy / (float)poolCount(g, includePad, p);
    }
  });
  return sum;
}

/// Elements of the column buffer of a whole batch (C·KH·KW rows by N·OH·OW
/// columns) of conv, conv_grad_input or conv_grad_weight, from its operand
/// and result shapes; 0 for other ops.
inline int64_t convColumnElements(const std::string_view op,
                                  const std::vector<std::vector<int64_t>> &in,
                                  const std::vector<std::vector<int64_t>> &out) {
  auto numel = [](const std::vector<int64_t> &s, size_t from) {
    int64_t n = 1;
    for (size_t d = from; d < s.size(); ++d)
      n *= s[d];
    return n;
  };
  if (in.size() < 2 || out.empty() || in[0].size() < 3 || in[1].size() < 3 ||
      out[0].size() < 3)
    return 0;
  // channels · kernel positions, and the gradient's (or output's) N · P.
  const std::vector<int64_t> *x, *k, *y;
  if (op == "conv") {
    x = &in[0], k = &in[1], y = &out[0];
  } else if (op == "conv_grad_input") {
    x = &out[0], k = &in[1], y = &in[0];
  } else if (op == "conv_grad_weight") {
    x = &in[0], k = &out[0], y = &in[1];
  } else {
    return 0;
  }
  return (*x)[1] * numel(*k, 2) * (*y)[0] * numel(*y, 2);
}

/// The column buffer of one image (the CPU kernels convolve image by
/// image): convColumnElements / N.
inline int64_t convImageColumnElements(
    const std::string_view op, const std::vector<std::vector<int64_t>> &in,
    const std::vector<std::vector<int64_t>> &out) {
  int64_t all = convColumnElements(op, in, out);
  // The batch: the first extent of the first operand (x, or the output
  // gradient of conv_grad_input).
  int64_t n = all ? in[0][0] : 0;
  return n > 0 ? all / n : 0;
}

} // namespace fsdp

#endif // FSDP_COMMON_CONVGEOMETRY_H
