//===- DataMovement.cpp - Data movement (CPU) -----------------------------===//
//
// Data movement: reshape, transpose, slices, concat, split, broadcast, trilu.
// (Declared in KernelSupport.h; dispatched by runtime/cpu/Kernels.cpp.)
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/kernels/KernelSupport.h"

#include "common/SortOrder.h"

#include <algorithm>
#include <vector>

namespace fsdp::cpu::kernels {

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

Status kReshape(const Instruction &in, Context &c) {
  if (in.in[0].bytes() != in.out[0].bytes())
    return Status::error("changes the size");
  void *dst = c.data(in.out[0]);
  const void *src = c.data(in.in[0]);
  if (dst != src)
    std::memmove(dst, src, in.in[0].bytes());
  return Status::ok();
}

/// Copies the elements of a strided view of `px` (element size `size`,
/// view extents `shape`, source strides `s`, first element `base`) into
/// `py` in row-major order. Output dimensions that are contiguous in the
/// source merge first, so a head split ([B,T,H,D] -> [B,H,T,D]) copies
/// rows of D elements with memcpy; the rows are split over the threads.
/// A view whose last dimension is strided in the source (a matrix
/// transpose) copies in square tiles, so both sides stay in cache.
void stridedCopy(const uint8_t *px, uint8_t *py, int64_t size, Shape shape,
                 Shape s, int64_t base) {
  // Drop unit dimensions and merge runs contiguous in the source.
  Shape ms, mst;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1)
      continue;
    if (!ms.empty() && mst.back() == s[d] * shape[d]) {
      ms[ms.size() - 1] *= shape[d];
      mst[mst.size() - 1] = s[d];
      continue;
    }
    ms.push_back(shape[d]);
    mst.push_back(s[d]);
  }
  if (ms.empty()) {
    std::memcpy(py, px + base * size, size);
    return;
  }
  int64_t rank = (int64_t)ms.size(), inner = ms.back(), total = product(ms);
  if (total == 0)
    return;
  // The source offset of index r over the first `dims` dimensions.
  auto rowOffset = [&](int64_t r, int64_t dims) {
    int64_t off = base;
    for (int64_t d = dims - 1; d >= 0; --d) {
      off += (r % ms[d]) * mst[d];
      r /= ms[d];
    }
    return off;
  };
  if (mst.back() == 1) { // contiguous rows
    int64_t rows = total / inner, bytes = inner * size;
#pragma omp parallel for if (total > kParallelMin)
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(py + r * bytes, px + rowOffset(r, rank - 1) * size, bytes);
    return;
  }
  // The last dimension is strided. When the one before it is contiguous
  // in the source (a transpose of the last two), copy [rows x cols] tiles
  // of each plane; anything else element by element.
  if (rank < 2 || mst[rank - 2] != 1 ||
      (size != 1 && size != 2 && size != 4 && size != 8)) {
    forEach(ms, {&mst}, [&](int64_t i, const int64_t *off) {
      std::memcpy(py + i * size, px + (base + off[0]) * size, size);
    });
    return;
  }
  constexpr int64_t kTile = 32;
  int64_t rowsK = ms[rank - 2], cols = inner, colStride = mst.back();
  int64_t planes = total / (rowsK * cols);
  int64_t tilesR = (rowsK + kTile - 1) / kTile,
          tilesC = (cols + kTile - 1) / kTile;
  // One tile of elements of `size` bytes (moved as T when T has that size).
  auto tile = [&](auto element, int64_t src, uint8_t *dst, int64_t r0,
                  int64_t r1, int64_t c0, int64_t c1) {
    using T = decltype(element);
    for (int64_t cc = c0; cc < c1; ++cc)
      for (int64_t r = r0; r < r1; ++r)
        std::memcpy(dst + (r * cols + cc) * sizeof(T),
                    px + (src + r + cc * colStride) * sizeof(T), sizeof(T));
  };
  struct Bytes8 {
    uint8_t b[8];
  };
#pragma omp parallel for collapse(2) if (total > kParallelMin)
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t t = 0; t < tilesR * tilesC; ++t) {
      int64_t src = rowOffset(p, rank - 2);
      uint8_t *dst = py + p * rowsK * cols * size;
      int64_t r0 = (t / tilesC) * kTile, c0 = (t % tilesC) * kTile;
      int64_t r1 = std::min(rowsK, r0 + kTile), c1 = std::min(cols, c0 + kTile);
      switch (size) {
      case 1:
        tile(uint8_t(), src, dst, r0, r1, c0, c1);
        break;
      case 2:
        tile(uint16_t(), src, dst, r0, r1, c0, c1);
        break;
      case 4:
        tile(float(), src, dst, r0, r1, c0, c1);
        break;
      default: // 8
        tile(Bytes8(), src, dst, r0, r1, c0, c1);
      }
    }
}

/// out[index] = in[sum(start[d] + index[d] * step[d]) * inStride[d]]
Status strided(Context &c, const TensorRef &x, const TensorRef &y,
               const Shape &starts, const Shape &steps, const Shape &perm) {
  Shape xs = stridesOf(x.shape), s((size_t)y.rank(), 0);
  int64_t base = 0;
  for (int64_t d = 0; d < y.rank(); ++d) {
    int64_t src = perm.empty() ? d : perm[d];
    s[d] = xs[src] * (steps.empty() ? 1 : steps[d]);
    base += (starts.empty() ? 0 : starts[d]) * xs[src];
  }
  stridedCopy(c.get<uint8_t>(x), c.get<uint8_t>(y), dtypeSize(x.dtype), y.shape,
              s, base);
  return Status::ok();
}

Status kTranspose(const Instruction &in, Context &c) {
  const TensorRef &x = in.in[0], &y = in.out[0];
  Shape perm = attrInts(in, "perm");
  if ((int64_t)perm.size() != x.rank() || y.rank() != x.rank())
    return Status::error("bad permutation");
  bool seen[kMaxRank] = {};
  for (size_t d = 0; d < perm.size(); ++d) {
    if (perm[d] < 0 || perm[d] >= x.rank() || seen[perm[d]] ||
        y.shape[d] != x.shape[perm[d]])
      return Status::error("bad permutation");
    seen[perm[d]] = true;
  }
  return strided(c, x, y, {}, {}, perm);
}

/// Checks a strided box of `x` with the extents of `box`.
Status checkBox(const TensorRef &x, const Shape &box, const Shape &starts,
                const Shape &steps) {
  if ((int64_t)box.size() != x.rank() || starts.size() != box.size() ||
      steps.size() != box.size())
    return Status::error("needs one start and stride per dimension");
  for (int64_t d = 0; d < x.rank(); ++d)
    if (starts[d] < 0 || steps[d] <= 0 ||
        (box[d] > 0 && starts[d] + (box[d] - 1) * steps[d] >= x.shape[d]))
      return Status::error("box outside " + shapeString(x.shape));
  return Status::ok();
}

Status kSlice(const Instruction &in, Context &c) {
  const TensorRef &x = in.in[0], &y = in.out[0];
  Shape starts = attrInts(in, "starts"), steps = attrInts(in, "strides");
  FSDP_RETURN_IF_ERROR(checkBox(x, y.shape, starts, steps));
  return strided(c, x, y, starts, steps, {});
}

Status kInsertSlice(const Instruction &in, Context &c) {
  const TensorRef &dest = in.in[0], &src = in.in[1], &y = in.out[0];
  Shape starts = attrInts(in, "starts"), steps = attrInts(in, "strides");
  if (dest.shape != y.shape || dest.dtype != src.dtype)
    return Status::error("output does not match the destination");
  FSDP_RETURN_IF_ERROR(checkBox(y, src.shape, starts, steps));
  uint8_t *py = c.get<uint8_t>(y);
  if (py != c.get<uint8_t>(dest))
    std::memcpy(py, c.get<uint8_t>(dest), dest.bytes());
  Shape ys = stridesOf(y.shape), s((size_t)y.rank(), 0);
  int64_t base = 0;
  for (int64_t d = 0; d < y.rank(); ++d) {
    s[d] = ys[d] * steps[d];
    base += starts[d] * ys[d];
  }
  int64_t size = dtypeSize(y.dtype);
  const uint8_t *ps = c.get<uint8_t>(src);
  forEach(src.shape, {&s}, [&](int64_t i, const int64_t *off) {
    std::memcpy(py + (base + off[0]) * size, ps + i * size, size);
  });
  return Status::ok();
}

Status kConcat(const Instruction &in, Context &c) {
  const TensorRef &y = in.out[0];
  int64_t axis = attrInt(in, "axis", 0), outer, inner;
  FSDP_RETURN_IF_ERROR(concatLayout(in.in, y, axis, false, outer, inner));
  int64_t size = dtypeSize(y.dtype);
  uint8_t *py = c.get<uint8_t>(y);
  int64_t row = y.shape[axis] * inner * size, at = 0;
  for (const TensorRef &x : in.in) {
    int64_t chunk = x.shape[axis] * inner * size;
    const uint8_t *px = c.get<uint8_t>(x);
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(py + o * row + at, px + o * chunk, chunk);
    at += chunk;
  }
  return Status::ok();
}

Status kSplit(const Instruction &in, Context &c) {
  const TensorRef &x = in.in[0];
  int64_t axis = attrInt(in, "axis", 0), outer, inner;
  FSDP_RETURN_IF_ERROR(concatLayout(in.out, x, axis, true, outer, inner));
  int64_t size = dtypeSize(x.dtype);
  const uint8_t *px = c.get<uint8_t>(x);
  int64_t row = x.shape[axis] * inner * size, at = 0;
  for (const TensorRef &y : in.out) {
    int64_t chunk = y.shape[axis] * inner * size;
    uint8_t *py = c.get<uint8_t>(y);
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(py + o * chunk, px + o * row + at, chunk);
    at += chunk;
  }
  return Status::ok();
}

Status kBroadcast(const Instruction &in, Context &c) {
  const TensorRef &x = in.in[0], &y = in.out[0];
  Shape s;
  if (!broadcastStrides(x.shape, y.shape, s) || x.dtype != y.dtype)
    return Status::error(shapeString(x.shape) + " does not broadcast to " +
                         shapeString(y.shape));
  int64_t size = dtypeSize(x.dtype);
  int64_t n = y.numel(), block = x.numel();
  // x repeated whole: a scalar (a gradient's zeros), or a tensor whose shape
  // is y's trailing extents (a bias over rows). Copies at memory speed.
  bool repeated =
      block > 0 && n % block == 0 && x.rank() <= y.rank() &&
      std::equal(x.shape.begin(), x.shape.end(), y.shape.end() - x.rank());
  if (repeated && size == 4) {
    const float *px = c.get<float>(x);
    float *py = c.get<float>(y);
    if (block == 1) {
      float v = px[0];
#pragma omp parallel for simd if (parallel : n > kParallelMin)
      for (int64_t i = 0; i < n; ++i)
        py[i] = v;
    } else {
#pragma omp parallel for if (n > kParallelMin)
      for (int64_t r = 0; r < n / block; ++r)
        std::memcpy(py + r * block, px, block * sizeof(float));
    }
    return Status::ok();
  }
  if (size == 4) {
    const float *px = c.get<float>(x);
    float *py = c.get<float>(y);
    forEach(y.shape, {&s},
            [&](int64_t i, const int64_t *off) { py[i] = px[off[0]]; });
    return Status::ok();
  }
  const uint8_t *px = c.get<uint8_t>(x);
  uint8_t *py = c.get<uint8_t>(y);
  forEach(y.shape, {&s}, [&](int64_t i, const int64_t *off) {
    std::memcpy(py + i * size, px + off[0] * size, size);
  });
  return Status::ok();
}

Status kTrilu(const Instruction &in, Context &c) {
  const TensorRef &x = in.in[0], &y = in.out[0];
  if (x.shape != y.shape || x.rank() < 2)
    return Status::error("needs rank >= 2 and one shape");
  int64_t k = attrInt(in, "k", 0);
  bool upper = attrBool(in, "upper", true);
  if (x.dtype != y.dtype)
    return Status::error("expects input and output of one dtype");
  int64_t rows = x.shape[x.rank() - 2], cols = x.shape[x.rank() - 1];
  // Elements copied as bytes (int64 exactly: through a double, values past
  // 2^53 rounded); zero is all-zero bytes in every dtype.
  int64_t size = dtypeSize(x.dtype);
  const uint8_t *px = c.get<uint8_t>(x);
  uint8_t *py = c.get<uint8_t>(y);
  for (int64_t i = 0, n = x.numel(); i < n; ++i) {
    int64_t col = i % cols, row = (i / cols) % rows;
    bool keep = upper ? col - row >= k : col - row <= k;
    if (keep)
      std::memcpy(py + i * size, px + i * size, size);
    else
      std::memset(py + i * size, 0, size);
  }
  return Status::ok();
}

Status kArgsort(const Instruction &in, Context &c) {
  const TensorRef &x = in.in[0], &y = in.out[0];
  int64_t axis = attrInt(in, "axis", 0);
  bool descending = attrBool(in, "descending", false);
  if (x.shape != y.shape || y.dtype != DType::I64 || x.dtype != DType::F32 ||
      axis < 0 || axis >= std::max<int64_t>(x.rank(), 1))
    return Status::error("needs an f32 input, an i64 result of its shape and "
                         "an axis in range");
  int64_t dim = x.rank() ? x.shape[axis] : 1;
  int64_t inner = 1;
  for (int64_t d = axis + 1; d < x.rank(); ++d)
    inner *= x.shape[d];
  int64_t outer = (dim != 0 && inner != 0) ? x.numel() / (dim * inner) : 0;
  const float *px = c.get<float>(x);
  int64_t *py = c.get<int64_t>(y);
  int64_t rows = outer * inner;
#pragma omp parallel for if (rows * dim > kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<int64_t> order(dim);
    int64_t o = r / inner, t = r % inner;
    const float *row = px + o * dim * inner + t;
    for (int64_t j = 0; j < dim; ++j)
      order[j] = j;
    std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return sortsBefore(row[a * inner], a, row[b * inner], b, descending);
    });
    for (int64_t j = 0; j < dim; ++j)
      py[(o * dim + j) * inner + t] = order[j];
  }
  return Status::ok();
}

} // namespace fsdp::cpu::kernels
