//===- ArenaPacking.cpp - Greedy-by-size offline arena packing ------------===//
#include "memory/ArenaPacking.h"

#include <algorithm>
#include <numeric>

using namespace mlir::fsdp;

namespace {

/// Places the buffers in `order`, each in a gap between the placed buffers
/// whose lifetimes overlap its own: the smallest that holds it
/// (`bestFit`) or the lowest; else on top of them. Returns the end of the
/// highest buffer's bytes (the top buffer's padding is never touched).
template <typename Rounded>
int64_t place(const std::vector<Lifetime> &buffers,
              const std::vector<size_t> &order, Rounded rounded, bool bestFit,
              std::vector<int64_t> &offsets) {
  struct Placed {
    int64_t offset, end, first, last;
  };
  std::vector<Placed> placed;
  placed.reserve(order.size());
  offsets.assign(buffers.size(), 0);
  if (buffers.empty())
    return 0;

  // Placed buffers by time: bucket k lists those alive at some instruction
  // in [lo + k * width, lo + (k + 1) * width), so a buffer meets only the
  // ones alive near its own lifetime instead of every one placed (all of
  // them, on a 70B step, made packing quadratic: most of a compile).
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (const Lifetime &b : buffers) {
    lo = std::min(lo, b.first);
    hi = std::max(hi, b.last);
  }
  int64_t width = std::max<int64_t>(1, (hi - lo + 1) / 256 + 1);
  std::vector<std::vector<uint32_t>> buckets((hi - lo) / width + 1);
  std::vector<uint32_t> seen(order.size(), 0);
  uint32_t query = 0;

  std::vector<std::pair<int64_t, int64_t>> busy; // (offset, end) in the way
  auto inOrder = [&](uint32_t a, uint32_t b) {
    return std::make_pair(placed[a].offset, placed[a].end) <
           std::make_pair(placed[b].offset, placed[b].end);
  };
  int64_t top = 0;
  for (size_t i : order) {
    const Lifetime &b = buffers[i];
    int64_t size = rounded(i);
    size_t from = (b.first - lo) / width, to = (b.last - lo) / width;
    busy.clear();
    ++query;
    auto take = [&](uint32_t j) {
      if (seen[j] == query)
        return;
      seen[j] = query;
      const Placed &p = placed[j];
      if (p.first <= b.last && b.first <= p.last)
        busy.push_back({p.offset, p.end});
    };
    // Buckets are kept in offset order: a buffer within one or two of
    // them (most are) reads its neighbours already sorted.
    if (to - from <= 1) {
      const std::vector<uint32_t> &x = buckets[from], &y = buckets[to];
      size_t m = 0, k = from == to ? y.size() : 0;
      while (m < x.size() || k < y.size())
        take(k == y.size() || (m < x.size() && inOrder(x[m], y[k])) ? x[m++]
                                                                    : y[k++]);
    } else {
      for (size_t k = from; k <= to; ++k)
        for (uint32_t j : buckets[k])
          take(j);
      std::sort(busy.begin(), busy.end());
    }
    int64_t cursor = 0, best = -1, bestGap = INT64_MAX;
    for (auto &[offset, end] : busy) {
      int64_t gap = offset - cursor;
      if (gap >= size && gap < bestGap) {
        best = cursor;
        bestGap = gap;
        if (!bestFit)
          break;
      }
      cursor = std::max(cursor, end);
    }
    int64_t offset = best >= 0 ? best : cursor;
    offsets[i] = offset;
    uint32_t id = uint32_t(placed.size());
    placed.push_back({offset, offset + size, b.first, b.last});
    for (size_t k = from; k <= to; ++k) {
      std::vector<uint32_t> &bucket = buckets[k];
      bucket.insert(std::upper_bound(bucket.begin(), bucket.end(), id, inOrder),
                    id);
    }
    top = std::max(top, offset + b.bytes);
  }
  return top;
}

/// The most bytes live at once: a sweep over lifetime starts and ends.
template <typename Rounded>
int64_t mostLive(const std::vector<Lifetime> &buffers, Rounded rounded) {
  std::vector<std::pair<int64_t, int64_t>> events; // (time, +/- bytes)
  events.reserve(2 * buffers.size());
  for (size_t i = 0; i < buffers.size(); ++i) {
    events.push_back({buffers[i].first, rounded(i)});
    events.push_back({buffers[i].last + 1, -rounded(i)});
  }
  std::sort(events.begin(), events.end(), [](const auto &a, const auto &b) {
    return a.first != b.first ? a.first < b.first : a.second < b.second;
  });
  int64_t live = 0, most = 0;
  for (auto &[t, delta] : events) {
    live += delta;
    most = std::max(most, live);
  }
  return most;
}

} // namespace


Packing mlir::fsdp::packArena(const std::vector<Lifetime> &buffers,
                              int64_t align) {
  size_t n = buffers.size();
  Packing out;
  out.offsets.assign(n, 0);
  auto rounded = [&](size_t i) {
    return (buffers[i].bytes + align - 1) / align * align;
  };

  out.liveBytes = mostLive(buffers, rounded);

  // Two orders, the smaller arena wins: largest first into the smallest
  // gap (the better one on large steps), and program order into the
  // lowest gap (an online first-fit allocator's result, which wins on
  // some small steps).
  std::vector<size_t> bySize(n), byStart(n);
  std::iota(bySize.begin(), bySize.end(), 0);
  std::iota(byStart.begin(), byStart.end(), 0);
  std::stable_sort(bySize.begin(), bySize.end(), [&](size_t a, size_t b) {
    if (rounded(a) != rounded(b))
      return rounded(a) > rounded(b);
    if (buffers[a].first != buffers[b].first)
      return buffers[a].first < buffers[b].first;
    return buffers[a].last > buffers[b].last;
  });
  std::stable_sort(byStart.begin(), byStart.end(), [&](size_t a, size_t b) {
    return buffers[a].first < buffers[b].first;
  });
  std::vector<int64_t> sized, started;
  int64_t sizedTop = place(buffers, bySize, rounded, /*bestFit=*/true, sized);
  int64_t startedTop =
      place(buffers, byStart, rounded, /*bestFit=*/false, started);
  bool first = startedTop < sizedTop;
  out.offsets = first ? started : sized;
  out.arenaBytes = first ? startedTop : sizedTop;
  return out;
}

Packing mlir::fsdp::liveOnly(const std::vector<Lifetime> &buffers,
                             int64_t align) {
  Packing out;
  out.liveBytes = mostLive(buffers, [&](size_t i) {
    return (buffers[i].bytes + align - 1) / align * align;
  });
  out.arenaBytes = out.liveBytes;
  return out;
}
