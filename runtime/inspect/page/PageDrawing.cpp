//===- PageDrawing.cpp - The page's drawings (SVG) ------------------------===//
//
// Part of fsdp-inspect's page (runtime/inspect/page/PageParts.h).
//
//===----------------------------------------------------------------------===//
#include "runtime/inspect/page/PageParts.h"

namespace fsdp::page {

namespace {

struct Frame {
  double width = 1180, left = 130, right = 20;
  double step;
  double x(double t) const { return left + (width - left - right) * t / step; }
};

/// The time axis along y = `y`, ticks and labels.
void timeAxis(std::ostream &os, const Frame &f, double y) {
  double tick = niceStep(f.step, 10);
  bool ms = f.step >= 2e-3;
  os << "<line x1='" << f.left << "' y1='" << y << "' x2='" << f.x(f.step)
     << "' y2='" << y << "' stroke='#333'/>\n";
  for (double t = 0; t <= f.step * 1.0001; t += tick) {
    os << "<line x1='" << f.x(t) << "' y1='" << y << "' x2='" << f.x(t)
       << "' y2='" << y + 5 << "' stroke='#333'/>"
       << "<text class='tick' x='" << f.x(t) << "' y='" << y + 17
       << "' text-anchor='middle'>"
       << (ms ? fmt("%g", std::round(t * 1e6) / 1e3)
              : fmt("%g", std::round(t * 1e7) / 10))
       << "</text>\n";
  }
  os << "<text class='axis' x='" << f.x(f.step) << "' y='" << y + 32
     << "' text-anchor='end'>time in the step (" << (ms ? "ms" : "us")
     << ")</text>\n";
}

void phaseBands(std::ostream &os, const Frame &f, const Summary &s, double top,
                double bottom) {
  const char *fill[] = {"#eef3fa", "#faf1e6", "#eef7ee"};
  for (size_t i = 0; i < s.phases.size(); ++i) {
    const auto &ph = s.phases[i];
    os << "<rect class='phase' x='" << f.x(ph.start) << "' y='" << top
       << "' width='" << std::max(0.0, f.x(ph.end) - f.x(ph.start))
       << "' height='" << bottom - top << "' fill='" << fill[i % 3]
       << "'><title>" << escape(ph.name) << ": " << timeText(ph.start) << " to "
       << timeText(ph.end) << "</title></rect>\n"
       << "<text class='phase-label' x='" << (f.x(ph.start) + f.x(ph.end)) / 2
       << "' y='" << top + 13 << "' text-anchor='middle'>" << escape(ph.name)
       << "</text>\n";
  }
}

/// Each lane's collectives labelled with their units, over the bars: a
/// run of bars closer together than their names is one cluster named
/// "h.0, h.1" after its last bar, where the lane has room before the next.
void unitLabels(std::ostream &os, const Frame &f, const Summary &s, double top,
                double lane) {
  for (size_t l = 0; l < s.lanes.size(); ++l) {
    struct Cluster {
      double x0, x1;
      std::vector<std::string> units;
    };
    std::vector<Cluster> clusters;
    for (const Summary::Comm &c : s.comms) {
      if (c.lane != s.lanes[l] || c.unit == "-")
        continue;
      double x0 = f.x(c.start), x1 = std::max(x0 + 0.6, f.x(c.end));
      if (!clusters.empty() && x0 - clusters.back().x1 < 24) {
        clusters.back().x1 = std::max(clusters.back().x1, x1);
        if (std::find(clusters.back().units.begin(),
                      clusters.back().units.end(),
                      c.unit) == clusters.back().units.end())
          clusters.back().units.push_back(c.unit);
      } else {
        clusters.push_back({x0, x1, {c.unit}});
      }
    }
    for (size_t k = 0; k < clusters.size(); ++k) {
      std::string name;
      for (const std::string &u : clusters[k].units)
        name += (name.empty() ? "" : ", ") + u;
      double width = 6.0 * (double)name.size() + 4;
      double room = (k + 1 < clusters.size() ? clusters[k + 1].x0 : f.width) -
                    clusters[k].x1 - 2;
      double y = top + l * lane + lane * 0.5 + 0.5;
      if (width <= clusters[k].x1 - clusters[k].x0 &&
          clusters[k].units.size() == 1)
        os << "<text class='unit-label' x='"
           << (clusters[k].x0 + clusters[k].x1) / 2 << "' y='" << y
           << "' text-anchor='middle'>" << escape(name) << "</text>\n";
      else if (width <= room)
        os << "<text class='unit-label outside' x='" << clusters[k].x1 + 2
           << "' y='" << y << "'>" << escape(name) << "</text>\n";
    }
  }
}

} // namespace

void timeline(std::ostream &os, const Plan &plan, const Summary &s,
              const std::vector<double> *measured) {
  Frame f;
  f.step = s.step;
  const double lane = 30, top = 22;
  size_t rows = s.lanes.size() + (measured ? 1 : 0);
  double exposedRow = top + rows * lane + 4;
  double axis = exposedRow + 16;
  os << "<svg class='timeline' xmlns='http://www.w3.org/2000/svg' width='"
     << f.width << "' height='" << axis + 40 << "'>\n";
  phaseBands(os, f, s, 0, exposedRow + 12);
  for (size_t l = 0; l < s.lanes.size(); ++l)
    os << "<text class='lane' x='6' y='" << top + l * lane + lane * 0.62 << "'>"
       << s.lanes[l] << "</text>\n";
  if (measured)
    os << "<text class='lane' x='6' y='"
       << top + s.lanes.size() * lane + lane * 0.62 << "'>measured</text>\n";
  os << "<text class='lane' x='6' y='" << exposedRow + 9 << "' fill='"
     << kExposedColour << "'>exposed comm</text>\n";
  // Compute kernels. Runs of kernels narrower together than a pixel and a
  // half are drawn as one rect (a 70B step has 11,000 of them).
  size_t runFirst = 0, runCount = 0;
  double runStart = 0, runEnd = 0, runBusy = 0;
  auto flush = [&]() {
    if (!runCount)
      return;
    const Instruction &first = plan.program[runFirst];
    double x0 = f.x(runStart), w = std::max(0.4, f.x(runEnd) - x0);
    os << "<rect class='op' x='" << fmt("%.2f", x0) << "' y='" << top + 4
       << "' width='" << fmt("%.2f", w) << "' height='" << lane - 8
       << "' fill='" << laneColour("compute") << "'><title>";
    if (runCount == 1)
      os << "#" << runFirst << " " << escape(first.op) << ": "
         << timeText(runBusy) << " at " << timeText(runStart);
    else
      os << runCount << " kernels from #" << runFirst << " ("
         << escape(first.op) << "): " << timeText(runBusy) << " busy from "
         << timeText(runStart);
    os << "</title></rect>\n";
    runCount = 0;
  };
  for (size_t i = 0; i < plan.program.size(); ++i) {
    const Instruction &in = plan.program[i];
    if (in.predictedStart < 0 || laneOf(in) != "compute" || in.op == "wait" ||
        in.op == "free")
      continue;
    if (runCount && f.x(in.predictedEnd) - f.x(runStart) > 1.5)
      flush();
    if (!runCount) {
      runFirst = i;
      runStart = in.predictedStart;
      runBusy = 0;
    }
    ++runCount;
    runEnd = std::max(runEnd, in.predictedEnd);
    if (runCount == 1)
      runEnd = in.predictedEnd;
    runBusy += in.predictedEnd - in.predictedStart;
    if (measured && i < measured->size() && (*measured)[i] > 0) {
      double x0 = f.x(in.predictedStart);
      double mw = std::max(0.4, f.x(in.predictedStart + (*measured)[i]) - x0);
      os << "<rect class='measured' x='" << fmt("%.2f", x0) << "' y='"
         << top + s.lanes.size() * lane + 4 << "' width='" << fmt("%.2f", mw)
         << "' height='" << lane - 8 << "' fill='#76b7b2'><title>#" << i << " "
         << escape(in.op) << ": measured " << timeText((*measured)[i])
         << ", predicted " << timeText(in.predictedEnd - in.predictedStart)
         << "</title></rect>\n";
    }
  }
  flush();
  // Collectives, labelled by unit.
  for (const Summary::Comm &c : s.comms) {
    size_t l =
        std::find(s.lanes.begin(), s.lanes.end(), c.lane) - s.lanes.begin();
    double y = top + std::min(l, s.lanes.size() - 1) * lane + 4;
    double x0 = f.x(c.start), w = std::max(0.6, f.x(c.end) - x0);
    os << "<g class='comm'><rect x='" << x0 << "' y='" << y << "' width='" << w
       << "' height='" << lane - 8 << "' fill='" << laneColour(c.lane)
       << "' stroke='#fff' stroke-width='0.5'><title>" << escape(c.kind)
       << " of unit " << escape(c.unit) << ": " << bytesText((double)c.bytes)
       << " " << c.dtype << ", group " << escape(c.group) << " (" << c.groupSize
       << " ranks), " << timeText(c.end - c.start) << ", exposed "
       << timeText(c.exposed) << "</title></rect>";
    os << "</g>\n";
    for (auto [a, b] : c.gaps)
      os << "<rect class='exposed' x='" << f.x(a) << "' y='" << exposedRow
         << "' width='" << std::max(0.6, f.x(b) - f.x(a))
         << "' height='10' fill='" << kExposedColour << "'><title>exposed "
         << escape(c.kind) << " of " << escape(c.unit) << ": "
         << timeText(b - a) << "</title></rect>\n";
  }
  unitLabels(os, f, s, top, lane);
  timeAxis(os, f, axis);
  os << "</svg>\n";
}

/// A bytes axis up to at least `most`: round ticks in the unit it is read
/// in (KiB, MiB, ...), its top, and the mapping to y.
struct BytesAxis {
  double top, height, max = 1, tick = 1;
  BytesAxis(double top, double height, double most, int ticks)
      : top(top), height(height) {
    double unit = 1;
    while (most / unit >= 1024 * 4 && unit < std::pow(1024.0, 4))
      unit *= 1024;
    tick = niceStep(std::max(most, 1.0) / unit, ticks) * unit;
    max = std::ceil(std::max(most, 1.0) / tick) * tick;
  }
  double y(double b) const { return top + height - height * b / max; }
  /// The grid, the tick labels and the axis title.
  void draw(std::ostream &os, const Frame &f, double step,
            const char *title) const {
    for (double b = 0; b <= max * 1.0001; b += tick)
      os << "<line x1='" << f.left - 5 << "' y1='" << y(b) << "' x2='"
         << f.x(step) << "' y2='" << y(b) << "' stroke='#ddd'/>"
         << "<text class='tick' x='" << f.left - 8 << "' y='" << y(b) + 4
         << "' text-anchor='end'>" << bytesText(b) << "</text>\n";
    os << "<text class='axis' x='12' y='" << top + height / 2
       << "' transform='rotate(-90 12 " << top + height / 2
       << ")' text-anchor='middle'>" << title << "</text>\n";
  }
};

void memoryChart(std::ostream &os, const Summary &s) {
  Frame f;
  f.step = s.step;
  const double top = 20, height = 300;
  const MemoryBreakdown &m = s.memory;
  std::vector<std::pair<std::string, int64_t>> state = {
      {"parameters (" + std::string(m.sharded ? "shards" : "whole") + ")",
       m.params},
      {"optimizer state", m.optimizer},
      {"constants", m.constants},
      {"kernel scratch", m.scratch},
      {"device copies of offloaded shards", m.deviceCopies}};
  int64_t base =
      m.params + m.optimizer + m.constants + m.scratch + m.deviceCopies;
  BytesAxis axis(top, height, (double)(base + std::max(m.arena, s.peakHeld)),
                 6);
  auto y = [&](double b) { return axis.y(b); };
  os << "<svg class='memory' xmlns='http://www.w3.org/2000/svg' width='"
     << f.width << "' height='" << top + height + 50 << "'>\n";
  // y axis.
  os << "<line x1='" << f.left << "' y1='" << top << "' x2='" << f.left
     << "' y2='" << top + height << "' stroke='#333'/>\n";
  axis.draw(os, f, s.step, "bytes per rank");
  // State bands (all step), then the arena's categories stacked.
  double below = 0;
  for (size_t i = 0; i < state.size(); ++i) {
    if (state[i].second <= 0)
      continue;
    os << "<rect class='band' x='" << f.left << "' y='"
       << y(below + state[i].second) << "' width='" << f.x(s.step) - f.left
       << "' height='" << y(below) - y(below + state[i].second) << "' fill='"
       << kStateColours[i] << "'><title>" << escape(state[i].first) << ": "
       << bytesText((double)state[i].second) << " (" << state[i].second
       << " bytes) all step</title></rect>\n";
    below += state[i].second;
  }
  std::vector<int64_t> stacked(s.times.size(), 0);
  for (size_t c = 0; c < s.categories.size(); ++c) {
    std::ostringstream upper;
    for (size_t i = 0; i < s.times.size(); ++i) {
      double t0 = s.times[i],
             t1 = i + 1 < s.times.size() ? s.times[i + 1] : s.step;
      double yu = y(below + stacked[i] + s.held[c][i]);
      upper << fmt("%.2f", f.x(t0)) << "," << fmt("%.2f", yu) << " "
            << fmt("%.2f", f.x(t1)) << "," << fmt("%.2f", yu) << " ";
    }
    std::string lowerPts;
    for (size_t k = s.times.size(); k-- > 0;) {
      double t0 = s.times[k],
             t1 = k + 1 < s.times.size() ? s.times[k + 1] : s.step;
      double yl = y(below + stacked[k]);
      lowerPts += fmt("%.2f", f.x(t1)) + "," + fmt("%.2f", yl) + " " +
                  fmt("%.2f", f.x(t0)) + "," + fmt("%.2f", yl) + " ";
    }
    int64_t most = 0;
    for (int64_t b : s.held[c])
      most = std::max(most, b);
    os << "<polygon class='area' points='" << upper.str() << lowerPts
       << "' fill='" << kCategoryColours[memoryCategoryIndex(s.categories[c])]
       << "'><title>" << escape(s.categories[c]) << ": up to "
       << bytesText((double)most) << "</title></polygon>\n";
    for (size_t i = 0; i < s.times.size(); ++i)
      stacked[i] += s.held[c][i];
  }
  // The peak held, and the planned arena above the state.
  if (!s.times.empty()) {
    double px = f.x(s.peakTime);
    double py = y(below + s.peakHeld);
    os << "<line x1='" << px << "' y1='" << top << "' x2='" << px << "' y2='"
       << top + height << "' stroke='#000' stroke-dasharray='4 3'/>"
       << "<circle cx='" << px << "' cy='" << py << "' r='4' fill='#000'/>"
       << "<text class='peak-label' x='" << px + 6 << "' y='" << py - 6
       << "'>peak in use " << bytesText(below + s.peakHeld) << " at "
       << timeText(s.peakTime) << "</text>\n";
  }
  double arenaTop = y(base + m.arena);
  os << "<line x1='" << f.left << "' y1='" << arenaTop << "' x2='"
     << f.x(s.step) << "' y2='" << arenaTop
     << "' stroke='#e15759' stroke-dasharray='6 3'/>"
     << "<text class='peak-label' x='" << f.x(s.step) << "' y='" << arenaTop - 5
     << "' text-anchor='end' fill='#e15759'>planned peak "
     << bytesText((double)m.total()) << " (state + arena)</text>\n";
  timeAxis(os, f, top + height);
  os << "</svg>\n";
}

void hostMemoryChart(std::ostream &os, const Summary &s) {
  const MemoryBreakdown &m = s.memory;
  if (m.host <= 0)
    return;
  Frame f;
  f.step = s.step;
  const double top = 20, height = 160;
  // The offloaded state all step, then the host arena in use on it.
  int64_t state = m.host - m.hostArena, most = 0;
  for (auto &[t, b] : s.hostHeld)
    most = std::max(most, b);
  BytesAxis axis(top, height, (double)(state + most), 4);
  auto y = [&](double b) { return axis.y(b); };
  os << "<svg class='memory' xmlns='http://www.w3.org/2000/svg' width='"
     << f.width << "' height='" << top + height + 50 << "'>\n";
  axis.draw(os, f, s.step, "host bytes per rank");
  os << "<rect class='band' x='" << f.left << "' y='" << y(state) << "' width='"
     << f.x(s.step) - f.left << "' height='" << y(0) - y(state) << "' fill='"
     << kStateColours[1] << "'><title>offloaded shards, "
     << "optimizer state and host buffers: " << bytesText((double)state)
     << " all step</title></rect>\n";
  if (!s.hostHeld.empty()) {
    std::ostringstream pts;
    for (size_t i = 0; i < s.hostHeld.size(); ++i) {
      double t0 = s.hostHeld[i].first,
             t1 = i + 1 < s.hostHeld.size() ? s.hostHeld[i + 1].first : s.step;
      double yu = y((double)(state + s.hostHeld[i].second));
      pts << fmt("%.2f", f.x(t0)) << "," << fmt("%.2f", yu) << " "
          << fmt("%.2f", f.x(t1)) << "," << fmt("%.2f", yu) << " ";
    }
    pts << fmt("%.2f", f.x(s.step)) << "," << fmt("%.2f", y(state)) << " "
        << fmt("%.2f", f.x(s.hostHeld[0].first)) << ","
        << fmt("%.2f", y(state));
    os << "<polygon class='area' points='" << pts.str() << "' fill='"
       << kLaneColours[6][1] << "'><title>host arena in use (gradient shards "
       << "copied to the host, host casts): up to " << bytesText((double)most)
       << "</title></polygon>\n";
  }
  timeAxis(os, f, top + height);
  os << "</svg>\n";
}

void legend(std::ostream &os, const Summary &s) {
  os << "<div class='legend'>";
  for (const std::string &lane : s.lanes)
    os << "<span><i style='background:" << laneColour(lane) << "'></i>" << lane
       << "</span>";
  os << "<span><i style='background:" << kExposedColour
     << "'></i>exposed communication</span>";
  for (size_t i = 0; i < s.phases.size(); ++i)
    os << "<span class='phase-key'>" << escape(s.phases[i].name) << " "
       << timeText(s.phases[i].end - s.phases[i].start) << "</span>";
  os << "</div>\n";
}

void memoryLegend(std::ostream &os, const Summary &s) {
  const MemoryBreakdown &m = s.memory;
  os << "<div class='legend'>";
  const char *names[] = {"parameters", "optimizer state", "constants",
                         "kernel scratch"};
  int64_t values[] = {m.params, m.optimizer, m.constants, m.scratch};
  for (size_t i = 0; i < 4; ++i)
    if (values[i] > 0)
      os << "<span><i style='background:" << kStateColours[i] << "'></i>"
         << names[i] << "</span>";
  for (const std::string &c : s.categories)
    os << "<span><i style='background:"
       << kCategoryColours[memoryCategoryIndex(c)] << "'></i>" << escape(c)
       << "</span>";
  os << "</div>\n";
}

} // namespace fsdp::page
