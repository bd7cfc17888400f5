//===- ArenaPacking.cpp - Greedy-by-size offline arena packing ------------===//
#include "passes/ArenaPacking.h"

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
  std::vector<std::pair<int64_t, int64_t>> busy; // (offset, end) in the way
  int64_t top = 0;
  for (size_t i : order) {
    const Lifetime &b = buffers[i];
    int64_t size = rounded(i);
    busy.clear();
    for (const Placed &p : placed)
      if (p.first <= b.last && b.first <= p.last)
        busy.push_back({p.offset, p.end});
    std::sort(busy.begin(), busy.end());
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
    placed.push_back({offset, offset + size, b.first, b.last});
    top = std::max(top, offset + b.bytes);
  }
  return top;
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

  // The most bytes live at once: a sweep over lifetime starts and ends.
  std::vector<std::pair<int64_t, int64_t>> events; // (time, +/- bytes)
  events.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    events.push_back({buffers[i].first, rounded(i)});
    events.push_back({buffers[i].last + 1, -rounded(i)});
  }
  std::sort(events.begin(), events.end(), [](const auto &a, const auto &b) {
    return a.first != b.first ? a.first < b.first : a.second < b.second;
  });
  int64_t live = 0;
  for (auto &[t, delta] : events) {
    live += delta;
    out.liveBytes = std::max(out.liveBytes, live);
  }

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
