//===- Autotune.cpp - Choose a plan under a memory budget -----------------===//
//
// The search runs the plan pipeline (units → checkpointing → sharding →
// collectives → schedule → memory plan → simulation) on copies of the
// trained module and reads each copy's `fsdp.predicted` step time and peak.
//
// Each unit climbs a ladder of memory-saving rungs, each cheaper in bytes
// and dearer in time than the one before:
//     keep gathered → reshard to N (within a node) → reshard
//       → recompute all but matmuls and attention (selective) → recompute
// (no-shard and shard-grad-op cannot reshard: keep → selective →
// recompute; the root unit does not recompute). Keeping everything gathered is
// the fastest plan; when it does not fit:
//   1. Units are grouped into classes that cost the same (same parameter
//      count and size; the first and last blocks and the root apart), and
//      one representative per class is simulated on each rung with every
//      other unit kept: the bytes each rung saves and the time it pays.
//   2. A greedy order of rung moves, cheapest time per byte saved first
//      (moves that save time come first), over all units.
//   3. The shortest prefix of that order whose simulated peak fits (the
//      peak falls as moves are applied): guessed where the bytes the moves
//      save add up to the excess, bracketed by doubling steps from there,
//      then bisected.
// That runs for units as wrapped and for pairs of them merged (fewer,
// larger collectives), then with a deeper prefetch; the fastest plan that
// fits wins. About 3 + classes × rungs + a few bracketing simulations per
// granularity.
//
// Cost: a trial is the whole plan pipeline on a copy of the module. On a
// step of more than 2,000 ops the trials take the live peak as the arena
// (packing is most of a large trial; the packed arena lands within a few
// percent of the live peak) and the plan chosen is packed and, if that
// pushes it over the budget, given more of its moves. The representatives'
// trials and the strategies' searches run on the context's threads. A 70B
// step at 1,024 ranks is tuned in about 9 s on two cores.
//
// The whole search runs once per strategy: the one asked for and, for
// full-shard over more than two nodes, hybrid-shard with shard groups of
// the smallest power-of-two count of nodes whose state leaves half the
// budget, and of twice that (short rings for the gathers, one all-reduce
// of the gradient shards across replicas). The fastest plan that fits
// wins, and every strategy tried is reported with its step and peak.
//
//===----------------------------------------------------------------------===//
#include "autotune/Autotune.h"
#include "costmodel/DeviceModel.h"
#include "dialect/AttrNames.h"

#include "dialect/FsdpOps.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Threading.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <atomic>
#include <map>
#include <memory>
#include <mutex>

using namespace mlir;
using namespace mlir::fsdp;

std::optional<int64_t> mlir::fsdp::parseByteSize(llvm::StringRef text) {
  static const std::pair<const char *, int64_t> units[] = {
      {"TiB", 1LL << 40}, {"GiB", 1LL << 30},      {"MiB", 1LL << 20},
      {"KiB", 1LL << 10}, {"TB", 1000000000000LL}, {"GB", 1000000000LL},
      {"MB", 1000000LL},  {"KB", 1000LL},          {"B", 1}};
  text = text.trim();
  int64_t scale = 1;
  for (auto [suffix, factor] : units)
    if (text.consume_back(suffix)) {
      scale = factor;
      break;
    }
  double value = 0;
  if (text.trim().getAsDouble(value) || value <= 0)
    return std::nullopt;
  return (int64_t)(value * double(scale));
}

namespace {

/// Where the diagnostics of the trial running on this thread go (trials run
/// on several threads at once); null outside a trial.
thread_local std::string *trialError = nullptr;

/// Bytes in the largest binary unit that keeps the figure at least 1.
std::string gib(int64_t bytes) {
  static const char *names[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = double(bytes);
  int unit = 0;
  while (std::abs(value) >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  return llvm::formatv(unit ? "{0:f2} {1}" : "{0:f0} {1}", value, names[unit])
      .str();
}

std::string ms(double seconds) {
  if (std::abs(seconds) < 1e-3)
    return llvm::formatv("{0:f1} us", seconds * 1e6).str();
  return llvm::formatv("{0:f1} ms", seconds * 1e3).str();
}

struct UnitInfo {
  std::string name;
  int64_t elements = 0;
  size_t params = 0;
};

/// One simulated plan.
struct Trial {
  bool ok = false;
  double step = 0;
  int64_t peak = 0, arena = 0, state = 0, scratch = 0;
  /// Offload: what the node's ranks keep in host memory, and the node's.
  int64_t hostPerNode = 0, hostMemory = 0;
  std::vector<UnitInfo> units; // module order
  std::string error;
};

/// One rung of a unit's ladder.
struct Rung {
  std::string reshard; // --reshard-after-forward value; "" leaves it alone
  bool recompute = false;
  bool selective = false; // keeps matmul and attention outputs
};

/// A move of one unit up its ladder, with what its class's representative
/// measured for it.
struct Move {
  size_t unit;
  size_t to;
  int64_t saved;
  double paid;
  std::string label; // what changes: "reshard", "recompute", ...
};

/// What a move saved when its class's representative made it alone.
std::string saves(const Move &m) {
  return m.saved > 0 ? gib(m.saved) : "nothing alone (with the others, some)";
}

class Tuner {
public:
  Tuner(ModuleOp trained, const PlanConfig &base, int64_t budget,
        llvm::raw_ostream &os, std::vector<AutotuneCandidate> *candidates)
      : trained(trained), base(base), budget(budget), os(os) {
    if (candidates)
      log = std::make_shared<Log>(candidates);
    // Trials of a small step pack their arenas (exact, and cheap there);
    // a large step's trials take the live peak as the arena (packing a
    // 70B step's 15,000 buffers is most of a trial, and the live peak is
    // within a few percent of the packed arena at that size) and the plan
    // chosen is packed and checked.
    int64_t ops = 0;
    if (auto step = trained.lookupSymbol<func::FuncOp>("train_step"))
      ops = (int64_t)step.getBody().front().getOperations().size();
    packTrials = ops < kPackTrialsBelow;
  }

  FailureOr<PlanConfig> run();
  /// The simulated step of the plan run() chose (seconds).
  double chosenStep = 0;

private:
  struct Search;
  struct Best;
  /// What one strategy's search found.
  struct Outcome;
  Outcome searchStrategy(int64_t perNode, const Trial *kept = nullptr);
  ModuleOp trained;
  PlanConfig base; // the strategy under search is set in it
  int64_t budget;
  llvm::raw_ostream &os;
  /// Simulations run, by this tuner and the copies searching beside it.
  std::shared_ptr<std::atomic<int>> simulations =
      std::make_shared<std::atomic<int>>(0);
  /// Every trial, for --autotune-candidates (shared by the strategies'
  /// searches, which run on threads).
  struct Log {
    explicit Log(std::vector<AutotuneCandidate> *out) : out(out) {}
    std::vector<AutotuneCandidate> *out;
    std::mutex mutex;
  };
  std::shared_ptr<Log> log;
  /// Steps with fewer ops than this are packed in every trial.
  static constexpr int64_t kPackTrialsBelow = 2000;
  bool packTrials = true;

  /// The strategy under search, for the report.
  static std::string describeStrategy(const FsdpShardOptions &shard) {
    if (shard.strategy != "hybrid-shard")
      return shard.strategy;
    int64_t r = std::max<int64_t>(1, shard.replicateGroups);
    return "hybrid-shard (shard groups of " +
           std::to_string(shard.worldSize / r) + ", " + std::to_string(r) +
           " replicas)";
  }

  bool canReshard() const {
    StringRef s = base.shard.strategy;
    return s == "full-shard" || s == "hybrid-shard";
  }

  /// The ladder of a unit.
  std::vector<Rung> ladder(StringRef unit, int64_t partial) const {
    std::vector<Rung> rungs;
    if (!canReshard()) {
      rungs.push_back({"", false});
      if (unit != "root") {
        rungs.push_back({"", true, true});
        rungs.push_back({"", true});
      }
      return rungs;
    }
    rungs.push_back({"false", false});
    if (partial)
      rungs.push_back({std::to_string(partial), false});
    rungs.push_back({"true", false});
    if (unit != "root") {
      rungs.push_back({"true", true, true});
      rungs.push_back({"true", true});
    }
    return rungs;
  }

  struct Search {
    int64_t merge = 1, depth = 1, partial = 0;
    std::vector<UnitInfo> units;
    std::vector<std::vector<Rung>> ladders;
    std::vector<size_t> classOf;
    // Per class, per rung: the representative's simulated plan.
    std::vector<std::vector<Trial>> measured;
    std::vector<Move> moves;
    size_t saving = 0; // the first moves, each of which saved on its own
  };

  PlanConfig configure(const Search &s, ArrayRef<size_t> levels,
                       int64_t depth) const {
    PlanConfig c = base;
    c.merge.group = s.merge;
    c.schedule.prefetchDepth = depth;
    c.schedule.limitAllGathers =
        std::max<int64_t>(base.schedule.limitAllGathers, depth + 1);
    std::string reshard =
        canReshard() ? "false" : base.shard.reshardAfterForward;
    SmallVector<std::string> recompute;
    for (size_t u = 0; u < levels.size(); ++u) {
      const Rung &r = s.ladders[u][levels[u]];
      if (canReshard() && r.reshard != "false")
        reshard += "," + s.units[u].name + "=" + r.reshard;
      if (r.recompute)
        recompute.push_back(s.units[u].name + (r.selective ? ":ops" : ""));
    }
    c.shard.reshardAfterForward = reshard;
    c.checkpointing.mode =
        recompute.empty() ? std::string("none") : llvm::join(recompute, ",");
    return c;
  }

  /// Runs the plan pipeline on a copy of the trained module; unless
  /// `pack` or `packTrials`, the arena is estimated as the live peak.
  Trial evaluate(PlanConfig config, bool pack = false) {
    ++*simulations;
    pack |= packTrials;
    config.memory.estimate = !pack;
    config.simulate.annotate = false;
    Trial t;
    MLIRContext *ctx = trained.getContext();
    OwningOpRef<ModuleOp> copy(trained.clone());
    PassManager pm(ctx);
    pm.enableVerifier(pack);
    addPlanPasses(pm, config, /*verify=*/false);
    trialError = &t.error; // diagnostics of this thread's trial go there
    bool failedRun = failed(pm.run(*copy));
    trialError = nullptr;
    if (failedRun) {
      if (log) {
        std::lock_guard<std::mutex> lock(log->mutex);
        log->out->push_back(describeCandidate(config));
      }
      return t;
    }
    auto predicted =
        (*copy)->getAttrOfType<DictionaryAttr>(mlir::fsdp::attrs::predicted);
    if (!predicted)
      return t;
    auto integer = [&](StringRef key) {
      auto a = predicted.getAs<IntegerAttr>(key);
      return a ? a.getInt() : 0;
    };
    t.ok = true;
    t.step = predicted.getAs<FloatAttr>("step_seconds").getValueAsDouble();
    t.peak = integer("peak_bytes");
    t.arena = integer("arena_bytes");
    t.state = integer("state_bytes");
    t.scratch = integer("scratch_bytes");
    t.hostPerNode = integer("host_bytes_per_node");
    t.hostMemory = integer("host_memory_bytes");
    if (log) {
      AutotuneCandidate c = describeCandidate(config);
      c.ok = true;
      c.stepSeconds = t.step;
      c.peakBytes = t.peak;
      c.estimated = !pack;
      std::lock_guard<std::mutex> lock(log->mutex);
      log->out->push_back(std::move(c));
    }
    SymbolTable symbols(*copy);
    for (UnitOp unit : copy->getOps<UnitOp>()) {
      UnitInfo info{unit.getSymName().str(), 0, unit.getParams().size()};
      for (Attribute a : unit.getParams())
        if (auto p = symbols.lookup<ParameterOp>(
                cast<FlatSymbolRefAttr>(a).getValue()))
          info.elements += p.getTensorType().getNumElements();
      t.units.push_back(std::move(info));
    }
    return t;
  }

  /// Classes, their representatives' measurements and the greedy order of
  /// moves, for the units of `first` (the everything-kept plan).
  void measure(Search &s, const Trial &first) {
    s.units = first.units;
    std::map<std::string, size_t> classIds;
    std::vector<std::vector<size_t>> members;
    size_t lastBlock = 0, blocks = 0;
    for (size_t u = 0; u < s.units.size(); ++u)
      if (s.units[u].name != "root") {
        lastBlock = u;
        ++blocks;
      }
    bool seenFirst = false;
    for (size_t u = 0; u < s.units.size(); ++u) {
      const UnitInfo &info = s.units[u];
      std::string key;
      if (info.name == "root")
        key = "root";
      else if (!seenFirst)
        key = "first";
      else if (u == lastBlock && blocks > 1)
        key = "last";
      else
        key = std::to_string(info.elements) + "/" + std::to_string(info.params);
      if (info.name != "root")
        seenFirst = true;
      auto [it, added] = classIds.try_emplace(key, members.size());
      if (added)
        members.emplace_back();
      members[it->second].push_back(u);
      s.classOf.push_back(it->second);
      s.ladders.push_back(ladder(info.name, s.partial));
    }
    // Every class's representative on each of its rungs (every other unit
    // kept): independent trials, run on the context's threads.
    std::vector<size_t> zero(s.units.size(), 0);
    std::vector<std::pair<size_t, size_t>> trials; // (class, rung)
    for (size_t c = 0; c < members.size(); ++c) {
      size_t rep = members[c][members[c].size() / 2];
      s.measured.push_back({first});
      s.measured.back().resize(s.ladders[rep].size());
      for (size_t k = 1; k < s.ladders[rep].size(); ++k)
        trials.push_back({c, k});
    }
    mlir::parallelFor(trained.getContext(), 0, trials.size(), [&](size_t i) {
      auto [c, k] = trials[i];
      std::vector<size_t> levels = zero;
      levels[members[c][members[c].size() / 2]] = k;
      s.measured[c][k] = evaluate(configure(s, levels, s.depth));
    });

    // Greedy: the cheapest time per byte saved next, over every unit's
    // next rungs (a rung that saves nothing on its own may be skipped over
    // by a jump to a higher one).
    std::vector<size_t> at(s.units.size(), 0);
    while (true) {
      std::optional<Move> best;
      double bestScore = 0;
      for (size_t u = 0; u < s.units.size(); ++u) {
        const auto &m = s.measured[s.classOf[u]];
        if (!m[at[u]].ok)
          continue;
        for (size_t k = at[u] + 1; k < m.size(); ++k) {
          if (!m[k].ok)
            continue;
          int64_t saved = m[at[u]].peak - m[k].peak;
          double paid = m[k].step - m[at[u]].step;
          if (saved <= 0)
            continue;
          double score = paid / double(saved);
          if (!best || score < bestScore - 1e-18 ||
              (std::abs(score - bestScore) <= 1e-18 && saved > best->saved)) {
            best = Move{u, k, saved, paid, change(s.ladders[u], at[u], k)};
            bestScore = score;
          }
        }
      }
      if (!best)
        break;
      at[best->unit] = best->to;
      s.moves.push_back(*best);
    }
    s.saving = s.moves.size();
    // What saves nothing alone (the peak is elsewhere while every other unit
    // stays put) may save once the others moved: each unit's way up its
    // remaining rungs ends the order, first units first, so the last prefix
    // is every unit on its last rung.
    for (size_t u = 0; u < s.units.size(); ++u) {
      const auto &m = s.measured[s.classOf[u]];
      for (size_t k = at[u] + 1; k < m.size() && m[at[u]].ok; ++k) {
        if (!m[k].ok)
          continue;
        s.moves.push_back(Move{u, k, 0, m[k].step - m[at[u]].step,
                               change(s.ladders[u], at[u], k)});
        at[u] = k;
      }
    }
  }

  /// What moving from rung `from` to rung `to` changes.
  static std::string change(ArrayRef<Rung> ladder, size_t from, size_t to) {
    SmallVector<std::string> parts;
    if (ladder[to].reshard != ladder[from].reshard)
      parts.push_back(ladder[to].reshard == "true"
                          ? "reshard"
                          : "reshard to " + ladder[to].reshard);
    if (ladder[to].recompute && !ladder[from].recompute)
      parts.push_back(ladder[to].selective ? "selective recompute"
                                           : "recompute");
    else if (ladder[to].recompute && !ladder[to].selective &&
             ladder[from].selective)
      parts.push_back("full recompute");
    return llvm::join(parts, "+");
  }

  std::vector<size_t> levelsAfter(const Search &s, size_t count) const {
    std::vector<size_t> levels(s.units.size(), 0);
    for (size_t i = 0; i < count; ++i)
      levels[s.moves[i].unit] = s.moves[i].to;
    return levels;
  }

  /// Within the device budget, and what the node's ranks offload within
  /// its host memory (where the device says how much it has).
  static bool fitsHost(const Trial &t) {
    return t.hostMemory <= 0 || t.hostPerNode <= t.hostMemory;
  }
  bool fits(const Trial &t) const {
    return t.ok && t.peak <= budget && fitsHost(t);
  }

  /// The shortest prefix of moves in (lo, hi] whose plan fits, by
  /// bisection, given that `lo` moves do not fit and `hi` do; `atHi` (hi's
  /// trial) becomes the answer's.
  size_t bisect(size_t lo, size_t hi, Trial &atHi,
                llvm::function_ref<Trial(size_t)> at) {
    while (hi - lo > 1) {
      size_t mid = (lo + hi) / 2;
      Trial t = at(mid);
      if (fits(t)) {
        hi = mid;
        atHi = std::move(t);
      } else {
        lo = mid;
      }
    }
    return hi;
  }

  /// Packs the chosen plan's arena (its trials only estimated it); when
  /// fragmentation pushes the plan over the budget, takes the fewest more
  /// of its moves with which the packed plan fits.
  bool packChosen(Best &b);
};

struct Tuner::Best {
  Search search;
  size_t prefix = 0; // moves applied
  std::vector<size_t> levels;
  int64_t depth = 1;
  Trial trial;
  FsdpShardOptions shard; // the strategy it was found with
};

struct Tuner::Outcome {
  std::optional<Best> best;
  std::optional<Trial> fastest, smallest;
  int64_t fastestMerge = 1; // the granularity `fastest` was planned with
  std::string smallestHow;
};

bool Tuner::packChosen(Best &b) {
  if (packTrials)
    return true; // its trial was packed
  const Search &s = b.search;
  auto packed = [&](size_t count) {
    return evaluate(configure(s, levelsAfter(s, count), b.depth),
                    /*pack=*/true);
  };
  Trial t = packed(b.prefix);
  if (fits(t)) {
    b.trial = t;
    return true;
  }
  // Fragmentation is a few percent: the prefix that fits packed is near.
  // Widen by doubling steps from the estimate's, then bisect.
  size_t lo = b.prefix, hi = lo, all = s.moves.size(), step = 1;
  Trial top;
  do {
    if (hi == all)
      return false;
    lo = hi;
    hi = std::min(all, lo + step);
    step *= 2;
    top = packed(hi);
  } while (!fits(top));
  b.prefix = bisect(lo, hi, top, packed);
  b.levels = levelsAfter(s, b.prefix);
  b.trial = std::move(top);
  return true;
}

/// `kept`: this strategy's everything-kept plan at units as wrapped, when
/// it was simulated already.
Tuner::Outcome Tuner::searchStrategy(int64_t perNode, const Trial *kept) {
  Outcome out;
  int64_t world = base.shard.worldSize;
  int64_t group = base.shard.strategy == "hybrid-shard"
                      ? world / std::max<int64_t>(1, base.shard.replicateGroups)
                      : world;
  // FSDP2's reshard_after_forward=N: keep 1/N, the node's share, so that
  // the backward gather stays on NVLink.
  int64_t partial =
      (perNode > 1 && group > perNode && group % perNode == 0) ? perNode : 0;
  for (int64_t k : {1, 2}) {
    Search s;
    s.merge = k;
    s.partial = partial;
    if (k > 1) {
      // Merging needs four blocks at least to leave two units.
      size_t blocks = llvm::count_if(out.fastest->units, [](const UnitInfo &u) {
        return u.name != "root";
      });
      if (blocks < 4)
        break;
    }
    // The everything-kept plan, with units as this granularity makes them
    // (no levels yet: every unit on its first rung).
    Trial first = k == 1 && kept ? *kept : evaluate(configure(s, {}, 1));
    if (!first.ok) {
      // (The asked strategy was seen to build before its search; another
      // one that does not build is just not a candidate.)
      if (k == 1)
        return out;
      continue;
    }
    if (!out.fastest || first.step < out.fastest->step) {
      out.fastest = first;
      out.fastestMerge = k;
    }
    measure(s, first);

    // The shortest prefix of moves that fits: none, or found by bisection
    // between a prefix that does not fit and one that does. The first guess
    // is where the bytes the moves' representatives saved add up to the
    // excess; from there the bracket widens, doubling, until it holds the
    // answer (every move applied, the smallest this granularity gets, at
    // worst): a few simulations, where bisecting all the moves took log2
    // of hundreds.
    size_t lo = 0, hi = 0;
    Trial atHi = first;
    if (!fits(first)) {
      size_t all = s.moves.size();
      auto at = [&](size_t count) {
        return count == 0 ? first
                          : evaluate(configure(s, levelsAfter(s, count), 1));
      };
      size_t guess = 0;
      for (int64_t excess = first.peak - budget; guess < all && excess > 0;
           ++guess)
        excess -= s.moves[guess].saved;
      guess = std::max<size_t>(guess, 1);
      size_t step = 1;
      hi = std::min(guess, all);
      atHi = at(hi);
      if (fits(atHi)) {
        // Widen down: the largest prefix below that does not fit.
        lo = hi;
        while (lo > 0) {
          size_t below = lo > step ? lo - step : 0;
          Trial t = at(below);
          if (fits(t)) {
            hi = below;
            atHi = t;
            lo = below;
            step *= 2;
            continue;
          }
          lo = below;
          break;
        }
      } else {
        // Widen up until a prefix fits (every move, at most).
        lo = hi;
        while (hi < all) {
          hi = std::min(all, lo + step);
          atHi = at(hi);
          if (fits(atHi))
            break;
          lo = hi;
          step *= 2;
        }
      }
      if (hi == all && !fits(atHi)) {
        // The moves that save nothing alone may add to the peak in the
        // end: the smaller of both prefixes is the floor reported.
        std::string how = "every unit on its last rung";
        if (s.saving > 0 && s.saving < all)
          if (Trial t = at(s.saving);
              t.ok && (!atHi.ok || t.peak < atHi.peak)) {
            atHi = t;
            how = "every move that saves on its own made";
          }
        if (atHi.ok && (!out.smallest || atHi.peak < out.smallest->peak)) {
          out.smallest = atHi;
          out.smallestHow = how + ", units merged by " + std::to_string(k);
        }
        continue;
      }
      hi = bisect(lo, hi, atHi, at);
    }
    std::vector<size_t> levels = levelsAfter(s, hi);
    int64_t depth = 1;
    // A deeper prefetch overlaps more, for one more unit gathered early.
    Trial deeper = evaluate(configure(s, levels, 2));
    if (fits(deeper) && deeper.step < atHi.step) {
      depth = 2;
      atHi = deeper;
    }
    if (!out.best || atHi.step < out.best->trial.step)
      out.best = Best{s, hi, levels, depth, atHi, base.shard};
  }

  return out;
}

FailureOr<PlanConfig> Tuner::run() {
  auto model = loadDeviceModel(base.simulate.device);
  if (!model)
    return mlir::emitError(trained.getLoc(), "--device: ")
           << llvm::toString(model.takeError());
  int64_t perNode = base.simulate.devicesPerNode > 0
                        ? (int64_t)base.simulate.devicesPerNode
                        : model->devicesPerNode;
  int64_t world = base.shard.worldSize;

  // The strategy: the one asked for, and when that is full-shard over more
  // than a node, hybrid-shard too (what users pick at scale: shorter rings
  // for the gathers, a replica all-reduce of the gradient shards across
  // nodes). Its shard groups: the smallest power-of-two count of nodes
  // whose state leaves half the budget to the arena, and twice that. The
  // plan as asked with everything kept says whether it builds at all and
  // what that state is (and starts the asked strategy's own search).
  Trial probe = evaluate(configure(Search{}, {}, 1));
  if (!probe.ok)
    return mlir::emitError(trained.getLoc(),
                           "--autotune: the plan does not build: ")
           << probe.error;
  std::vector<FsdpShardOptions> strategies{base.shard};
  if (base.shard.strategy == "full-shard" && perNode > 1 &&
      world > 2 * perNode && world % perNode == 0) {
    int64_t first = 0;
    for (int64_t g = perNode; g < world; g *= 2)
      if (world % g == 0 && probe.state * (world / g) <= budget / 2) {
        first = g;
        break;
      }
    for (int64_t g : {first, 2 * first}) {
      if (g <= 0 || g >= world || world % g != 0)
        continue;
      FsdpShardOptions hybrid = base.shard;
      hybrid.strategy = "hybrid-shard";
      hybrid.replicateGroups = world / g;
      strategies.push_back(hybrid);
    }
  }
  // The strategies' searches are independent: each on a thread of the
  // context's pool (one at a time when threading is disabled).
  std::vector<Outcome> outcomes(strategies.size());
  mlir::parallelFor(trained.getContext(), 0, strategies.size(), [&](size_t i) {
    Tuner worker(*this);
    worker.base.shard = strategies[i];
    outcomes[i] = worker.searchStrategy(perNode, i == 0 ? &probe : nullptr);
  });
  std::vector<std::pair<std::string, Outcome>> tried;
  for (size_t i = 0; i < strategies.size(); ++i)
    tried.emplace_back(describeStrategy(strategies[i]), std::move(outcomes[i]));
  Outcome *won = nullptr;
  for (auto &[name, o] : tried)
    if (o.best && (!won || o.best->trial.step < won->best->trial.step))
      won = &o;
  Outcome &chosen = won ? *won : tried[0].second;
  std::optional<Best> &best = chosen.best;
  std::optional<Trial> &fastest = chosen.fastest, &smallest = chosen.smallest;
  std::string &smallestHow = chosen.smallestHow;
  if (best) {
    base.shard = best->shard;
    if (!packChosen(*best))
      best.reset();
    // Reported beside the choice: packed too.
    Search plain;
    plain.merge = chosen.fastestMerge;
    if (!packTrials)
      if (Trial t = evaluate(configure(plain, {}, 1), /*pack=*/true); t.ok)
        fastest = t;
  }
  if (!best) {
    InFlightDiagnostic err =
        mlir::emitError(trained.getLoc(), "--memory-budget=");
    err << gib(budget) << ": no plan fits";
    if (smallest && smallest->peak <= budget && !fitsHost(*smallest)) {
      err << "; the smallest predicted peak, " << gib(smallest->peak)
          << ", fits the device, but the node's ranks would keep "
          << gib(smallest->hostPerNode) << " in host memory, over the node's "
          << gib(smallest->hostMemory) << " (offload less, or spread over "
          << "more nodes)";
      return failure();
    }
    if (smallest) {
      err << "; the smallest predicted peak is " << gib(smallest->peak) << " ("
          << smallestHow << "): arena " << gib(smallest->arena)
          << " (activations and gathered parameters), state "
          << gib(smallest->state)
          << " (parameters, gradients, optimizer moments), kernel scratch "
          << gib(smallest->scratch) << "; ";
      if (smallest->state >= smallest->arena)
        err << "the state dominates: shard over more ranks";
      else
        err << "the arena dominates: a smaller micro-batch (with "
               "--grad-accum) or a shorter sequence";
    }
    return failure();
  }

  const Search &s = best->search;
  os << "autotune: budget " << gib(budget) << " on " << model->name << " x "
     << world << " (" << perNode << " per node), " << simulations->load()
     << " simulations"
     << (packTrials ? ""
                    : " (arenas estimated as the live peak, the plan "
                      "chosen packed)")
     << "\n";
  if (tried.size() > 1)
    for (auto &[name, o] : tried) {
      os << "autotune: " << (&o == won ? "chose " : "tried ") << name << ": ";
      if (o.best)
        os << "step " << ms(o.best->trial.step) << ", peak "
           << gib(o.best->trial.peak) << "\n";
      else
        os << "no plan fits"
           << (o.smallest ? " (smallest peak " + gib(o.smallest->peak) + ")"
                          : std::string())
           << "\n";
    }
  os << "autotune: units merged by " << s.merge << ", prefetch depth "
     << best->depth << ": step " << ms(best->trial.step) << ", peak "
     << gib(best->trial.peak)
     << " (nothing resharded or recomputed: " << ms(fastest->step) << ", "
     << gib(fastest->peak) << ")\n";
  os << llvm::format("%-28s %-8s %-9s  %s\n", "unit", "reshard", "recompute",
                     "why");
  for (size_t u = 0; u < s.units.size(); ++u) {
    size_t level = best->levels[u];
    const Rung &r = s.ladders[u][level];
    std::string why;
    if (level == 0) {
      why = "fits without a move";
      for (const Move &m : s.moves)
        if (m.unit == u) {
          why +=
              "; " + m.label + " would save " + saves(m) + " for " + ms(m.paid);
          break;
        }
    } else {
      // A unit's moves climb its ladder, so those applied are the ones up
      // to its level.
      SmallVector<std::string> parts;
      for (const Move &m : s.moves)
        if (m.unit == u && m.to <= level)
          parts.push_back(m.label + " saves " + saves(m) + " for " +
                          ms(m.paid));
      why = llvm::join(parts, "; ");
    }
    std::string reshard = r.reshard.empty() ? "-" : r.reshard;
    os << llvm::format(
        "%-28s %-8s %-9s  %s\n", s.units[u].name.c_str(), reshard.c_str(),
        r.recompute ? (r.selective ? "ops" : "yes") : "no", why.c_str());
  }
  chosenStep = best->trial.step;
  return configure(s, best->levels, best->depth);
}

} // namespace

AutotuneCandidate mlir::fsdp::describeCandidate(const PlanConfig &config) {
  AutotuneCandidate c;
  c.strategy = config.shard.strategy;
  c.replicateGroups = std::max<int64_t>(1, config.shard.replicateGroups);
  c.reshard = config.shard.reshardAfterForward;
  c.recompute = config.checkpointing.mode;
  c.merge = config.merge.group;
  c.prefetchDepth = config.schedule.prefetchDepth;
  return c;
}

FailureOr<PlanConfig>
mlir::fsdp::autotunePlan(ModuleOp trained, const PlanConfig &base,
                         int64_t budget, llvm::raw_ostream &os,
                         std::vector<AutotuneCandidate> *candidates) {
  // A trial's errors are kept with the trial (the first one says why its
  // plan failed); everything else goes on to the tool's handler.
  ScopedDiagnosticHandler route(trained.getContext(), [](Diagnostic &d) {
    if (!trialError)
      return failure();
    if (d.getSeverity() == DiagnosticSeverity::Error && trialError->empty())
      *trialError = d.str();
    return success();
  });
  if (base.offload.offload != "auto")
    return Tuner(trained, base, budget, os, candidates).run();
  // --offload=auto: no offload if a plan fits without; else the least that
  // fits: a share of each unit's optimizer state (its last parameters:
  // OffloadSpec.h) in eighths, then all of it (ZeRO-Offload: the device
  // keeps a gather-dtype copy), then every shard (which frees that copy for
  // fewer recomputations). A level that offloads more is taken only where
  // it is faster by more than 1% (its freed memory bought less
  // recomputation). Each level's search is a whole autotune; a level that
  // fits nothing says its smallest peak.
  struct Level {
    std::string mode, text, error;
    FailureOr<PlanConfig> tuned = failure();
    double step = 0;
  };
  auto tune = [&](const std::string &mode) {
    Level l;
    l.mode = mode;
    PlanConfig config = base;
    config.offload.offload = mode;
    llvm::raw_string_ostream out(l.text);
    {
      ScopedDiagnosticHandler capture(trained.getContext(), [&](Diagnostic &d) {
        if (d.getSeverity() == DiagnosticSeverity::Remark)
          return success(); // (a unit's share, per trial)
        if (d.getSeverity() != DiagnosticSeverity::Error)
          return failure();
        if (l.error.empty())
          l.error = d.str();
        return success();
      });
      Tuner tuner(trained, config, budget, out, candidates);
      l.tuned = tuner.run();
      l.step = tuner.chosenStep;
    }
    return l;
  };
  Level none = tune("none");
  if (succeeded(none.tuned)) {
    os << "autotune: --offload=none: the plan fits on the device\n"
       << none.text;
    return none.tuned;
  }
  os << "autotune: --offload=none: " << none.error << "\n";
  // Least offload first.
  std::vector<Level> levels;
  for (const char *share :
       {"optimizer:0.125", "optimizer:0.25", "optimizer:0.375", "optimizer:0.5",
        "optimizer:0.625", "optimizer:0.75", "optimizer:0.875"})
    if (levels.empty() || failed(levels.back().tuned))
      levels.push_back(tune(share));
  levels.push_back(tune("optimizer"));
  levels.push_back(tune("all"));
  Level *chosen = nullptr;
  for (Level &l : levels) {
    os << "autotune: --offload=" << l.mode << ": "
       << (succeeded(l.tuned) ? "step " + ms(l.step) : l.error) << "\n";
    if (succeeded(l.tuned) && (!chosen || l.step < 0.99 * chosen->step))
      chosen = &l;
  }
  if (chosen) {
    bool less = llvm::any_of(
        levels, [&](Level &l) { return &l > chosen && succeeded(l.tuned); });
    bool first = llvm::none_of(
        levels, [&](Level &l) { return &l < chosen && succeeded(l.tuned); });
    os << "autotune: chose --offload=" << chosen->mode
       << (!first ? " (faster: the device memory it frees spares "
                    "recomputation)"
           : less ? " (offloads least, at least as fast)"
                  : " (the only level that fits)")
       << "\n"
       << chosen->text;
    return chosen->tuned;
  }
  return mlir::emitError(trained.getLoc(), "--offload=auto: no plan fits "
                                           "even with every shard offloaded");
}
