//===- fsdp-inspect.cpp - Show a plan to a person tuning it ---------------===//
#include "runtime/inspect/Inspect.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>

using namespace fsdp;

int main(int argc, char **argv) {
  CLI::App app{"fsdp-inspect: units, schedule and memory of an fsdp plan"};
  std::string planPath, otherPath, tracePath;
  int64_t ranks = 4;
  app.add_option("plan", planPath, "the plan (fsdp-opt ... -o FILE.plan)")
      ->required();
  app.add_option("other", otherPath,
                 "a second plan of the same model: --html shows the two "
                 "side by side with what differs");
  app.add_option("--trace", tracePath,
                 "write the predicted timeline as a Chrome trace (JSON)");
  app.add_option("--ranks", ranks, "ranks (processes) in the trace");
  std::string comparePath, htmlPath;
  app.add_option("--html", htmlPath,
                 "write one self-contained page: the step's timeline, memory "
                 "by category, the units (with --compare: measured too)");
  app.add_option("--compare", comparePath,
                 "a measured trace (fsdp-run --trace): predicted against "
                 "measured");
  std::string candidatesPath;
  app.add_option("--candidates", candidatesPath,
                 "with --html: fsdp-opt --autotune-candidates' file; the page "
                 "shows the plans autotune weighed and why the chosen won");
  std::string fitBase, fitOut;
  app.add_option("--fit-device", fitBase,
                 "with --compare: the device JSON the plan was simulated on; "
                 "writes it fitted to the measured run (per-op scales)");
  app.add_option("--fit-out", fitOut, "where --fit-device writes the result");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    return app.exit(e);
  }
  Plan plan;
  if (Status s = loadPlan(planPath, plan); !s) {
    std::fprintf(stderr, "fsdp-inspect: error: %s\n", s.message().c_str());
    return 1;
  }
  std::cout << "== units\n";
  printUnits(plan, std::cout);
  std::cout << "== memory\n";
  printMemory(plan, std::cout);
  std::cout << "== schedule (predicted)\n";
  printSchedule(plan, std::cout);
  if (!comparePath.empty()) {
    std::cout << "== predicted against measured\n";
    if (Status s = compareMeasured(plan, comparePath, std::cout); !s) {
      std::fprintf(stderr, "fsdp-inspect: error: %s\n", s.message().c_str());
      return 1;
    }
  }
  if (!fitBase.empty()) {
    if (comparePath.empty() || fitOut.empty()) {
      std::fprintf(stderr, "fsdp-inspect: error: --fit-device needs "
                           "--compare MEASURED.json and --fit-out OUT.json\n");
      return 1;
    }
    std::cout << "== device fitted to the measured run: " << fitOut << "\n";
    if (Status s = fitDevice(plan, comparePath, fitBase, fitOut, std::cout);
        !s) {
      std::fprintf(stderr, "fsdp-inspect: error: %s\n", s.message().c_str());
      return 1;
    }
  }
  if (!candidatesPath.empty() && htmlPath.empty()) {
    std::fprintf(stderr, "fsdp-inspect: error: --candidates is shown on the "
                         "page: give --html FILE\n");
    return 1;
  }
  if (!otherPath.empty()) {
    Plan other;
    if (Status s = loadPlan(otherPath, other); !s) {
      std::fprintf(stderr, "fsdp-inspect: error: %s\n", s.message().c_str());
      return 1;
    }
    if (htmlPath.empty()) {
      std::fprintf(stderr, "fsdp-inspect: error: a second plan is compared "
                           "on a page: give --html FILE\n");
      return 1;
    }
    if (Status s = writeDiffHtml(plan, planPath, other, otherPath, htmlPath);
        !s) {
      std::fprintf(stderr, "fsdp-inspect: error: %s\n", s.message().c_str());
      return 1;
    }
    std::cout << "page: " << htmlPath << "\n";
    htmlPath.clear();
  }
  if (!htmlPath.empty()) {
    nlohmann::json measured;
    if (!comparePath.empty())
      if (Status s = loadMeasuredTrace(plan, comparePath, measured); !s) {
        std::fprintf(stderr, "fsdp-inspect: error: %s\n", s.message().c_str());
        return 1;
      }
    nlohmann::json candidates;
    if (!candidatesPath.empty())
      if (Status s = loadCandidates(candidatesPath, candidates); !s) {
        std::fprintf(stderr, "fsdp-inspect: error: %s\n", s.message().c_str());
        return 1;
      }
    if (Status s = writeHtml(plan, htmlPath,
                             comparePath.empty() ? nullptr : &measured,
                             candidatesPath.empty() ? nullptr : &candidates);
        !s) {
      std::fprintf(stderr, "fsdp-inspect: error: %s\n", s.message().c_str());
      return 1;
    }
    std::cout << "page: " << htmlPath << "\n";
  }
  if (!tracePath.empty()) {
    if (Status s = writeTrace(plan, tracePath, ranks); !s) {
      std::fprintf(stderr, "fsdp-inspect: error: %s\n", s.message().c_str());
      return 1;
    }
    std::cout << "trace: " << tracePath << " (open in ui.perfetto.dev)\n";
  }
  return 0;
}
