#!/usr/bin/env python3
"""fsdp-inspect's page in a real browser (headless Chromium).

Plans a small GPT-2 two ways (4 ranks, activation checkpointing and one
unit kept gathered; and without either), writes the page of the first, the
two-plan page, and the page of a one-rank plan with a measured run; then
renders each in headless Chromium:
  - the rendered DOM's text has the axis labels, phases, the unit labels on
    the collectives, the legend, and the figures of fsdp-inspect's text
    report to the byte (planned peak, arena, arena in use);
  - the screenshot holds the legend's colours and the stacked memory areas
    (pixels of each category's colour in the memory chart's rows), the
    exposed-communication strip, and the lanes.
Without Chromium it fails, or exits 77 (skipped) where FSDP_NO_CHROMIUM=1 asks.
"""
import argparse
import os
import re
import shutil
import subprocess
import bounded  # subprocess.run with a deadline
import sys
import tempfile

from PIL import Image


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def render(browser, page, png, height):
    base = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            "--window-size=1240,%d" % height]
    dom = bounded.run(base + ["--dump-dom", "file://" + page], check=True,
                         capture_output=True, text=True).stdout
    bounded.run(base + ["--screenshot=" + png, "file://" + page], check=True,
                   capture_output=True)
    return dom


def pixels(png):
    """Counts of each colour in the screenshot (RGB hex)."""
    img = Image.open(png).convert("RGB")
    counts = {}
    for count, rgb in img.getcolors(maxcolors=1 << 20):
        counts["#%02x%02x%02x" % rgb] = count
    return counts, img


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fsdp-opt", required=True)
    ap.add_argument("--fsdp-inspect", required=True)
    ap.add_argument("--fsdp-run", required=True)
    ap.add_argument("--generator", required=True)
    a = ap.parse_args()
    browser = chromium()
    if not browser:
        if os.environ.get("FSDP_NO_CHROMIUM") == "1":
            print("SKIPPED: FSDP_NO_CHROMIUM=1 and no Chromium; this suite checked nothing")
            return 77
        print("inspect_page: FAILED: no Chromium (scripts/install-deps.sh installs it; "
              "FSDP_NO_CHROMIUM=1 skips this suite)")
        return 1
    failures = []

    def check(what, ok):
        print(("ok   " if ok else "FAIL ") + what)
        if not ok:
            failures.append(what)

    with tempfile.TemporaryDirectory() as tmp:
        onnx = os.path.join(tmp, "gpt2.onnx")
        bounded.run(["/usr/bin/python3", a.generator, "gpt2", "--loss", "--layers", "4",
                        "-o", onnx], check=True, capture_output=True)
        plan_a, plan_b = os.path.join(tmp, "a.plan"), os.path.join(tmp, "b.plan")
        common = [onnx, "--world-size=4", "--device=h100-sxm"]
        bounded.run([a.fsdp_opt] + common + ["-o", plan_a, "--activation-checkpointing=units",
                        "--reshard-after-forward=default,h.1=false"],
                       check=True, capture_output=True)
        bounded.run([a.fsdp_opt] + common + ["-o", plan_b], check=True, capture_output=True)
        page = os.path.join(tmp, "a.html")
        report = bounded.run([a.fsdp_inspect, plan_a, "--html", page], check=True,
                                capture_output=True, text=True).stdout
        dom = render(browser, page, os.path.join(tmp, "a.png"), 1900)
        text = re.sub(r"<[^>]+>", " ", dom)

        # The figures of the text report, to the byte.
        total = re.search(r"peak memory per rank [0-9.]+ MiB \((\d+) bytes\)", report).group(1)
        check(f"planned peak {total} bytes on the page",
              re.search(r"planned peak</td><td class=\"num\">[^<]*</td><td class=\"num bytes\">"
                        + total + "<", dom) is not None)
        arena_mib = re.search(r"\(arena\) ([0-9.]+) MiB", report).group(1)
        arena = re.search(r"arena \(planned\)</td><td class=\"num\">[^<]*</td>"
                          r"<td class=\"num bytes\">(\d+)<", dom)
        check(f"arena {arena_mib} MiB on the page",
              arena is not None and "%.2f" % (int(arena.group(1)) / 2**20) == arena_mib)
        held_mib = re.search(r"holds at most ([0-9.]+) MiB after an instruction", report).group(1)
        held = re.search(r"arena in use</td><td class=\"num\">[^<]*</td>"
                         r"<td class=\"num bytes\">(\d+)<", dom)
        check(f"arena in use {held_mib} MiB on the page, and why it differs",
              held is not None and "%.2f" % (int(held.group(1)) / 2**20) == held_mib
              and "the arena is larger by" in text)
        # Axis labels, phases, legend, unit labels on the collectives.
        for label in ("time in the step (us)", "bytes per rank", "forward", "backward",
                      "optimizer", "exposed communication", "gathered parameters",
                      "saved activations", "recomputed activations", "gradients",
                      "optimizer state", "planned peak", "peak in use"):
            check(f"text '{label}'", label in text)
        unit_labels = {u.strip() for label in
                       re.findall(r'class="unit-label[^"]*"[^>]*>([^<]+)<', dom)
                       for u in label.split(",")}
        check(f"collectives labelled by unit ({sorted(unit_labels)})",
              {"h.0", "h.2"} <= unit_labels)
        titles = re.findall(r"<title>(all_gather of unit [^<]+)</title>", dom)
        check("a collective's details on hover (kind, unit, bytes, dtype, group)",
              any(re.search(r"all_gather of unit h\.0: [0-9.]+ KiB f32, group world \(4 ranks\)",
                            t) for t in titles))
        check("unit table: h.1 kept gathered, h.0 resharded and recomputed",
              re.search(r"<td>h\.1</td>(<td[^>]*>[^<]*</td>){4}<td>no</td>", dom) is not None
              and re.search(r"<td>h\.0</td>(<td[^>]*>[^<]*</td>){4}<td>yes</td>", dom)
              is not None and "recomputing costs" in text)
        check("exposed communication totalled for the step",
              re.search(r"<td>step</td>.*?<td class=\"num\">[0-9.]+ us</td>", dom) is not None)

        # The screenshot: lanes, the exposed strip, legend and stacked areas.
        counts, img = pixels(os.path.join(tmp, "a.png"))
        for name, colour in (("compute lane", "#4e79a7"), ("all-gathers", "#f28e2b"),
                             ("reduce-scatters", "#59a14f"), ("exposed strip", "#e15759"),
                             ("optimizer state band", "#d4a6c8"),
                             ("parameter shards band", "#bab0ac")):
            check(f"screenshot: {name} ({colour}, {counts.get(colour, 0)} px)",
                  counts.get(colour, 0) > 150)
        # The memory chart's areas: the rows between the memory legend and
        # the peak table, each category colour there in quantity.
        w, h = img.size
        region = {}
        svgs = [m.start() for m in re.finditer(r"<svg class=\"memory\"", dom)]
        check("one memory chart", len(svgs) == 1)
        for y in range(h // 3, h):
            for x in range(130, w - 30, 3):
                c = "#%02x%02x%02x" % img.getpixel((x, y))
                region[c] = region.get(c, 0) + 1
        areas = [c for c in ("#f28e2b", "#4e79a7", "#9c755f", "#59a14f", "#edc948")
                 if region.get(c, 0) > 300]
        check(f"stacked areas of 4+ categories in the memory chart ({areas})", len(areas) >= 4)

        # Two plans side by side: what differs.
        diff = os.path.join(tmp, "diff.html")
        bounded.run([a.fsdp_inspect, plan_a, plan_b, "--html", diff], check=True,
                       capture_output=True)
        dom = render(browser, diff, os.path.join(tmp, "diff.png"), 1200)
        text = re.sub(r"<[^>]+>", " ", dom)
        check("diff: the table of step, exposed communication and peak",
              all(k in text for k in ("step", "exposed communication", "planned peak",
                                      "at the peak: gathered parameters")))
        check("diff: unit choices that differ (h.1 kept gathered in A only)",
              re.search(r"<td>h\.1</td><td>reshard no", dom) is not None)
        check("diff: both plans' pages follow", dom.count("<svg class=\"memory\"") == 2)

        # Measured against predicted on one rank.
        one = os.path.join(tmp, "one.plan")
        bounded.run([a.fsdp_opt, onnx, "-o", one], check=True, capture_output=True)
        measured = os.path.join(tmp, "measured.json")
        bounded.run([a.fsdp_run, one, "--steps", "3", "--trace", measured, "--quiet"],
                       check=True)
        cmp = os.path.join(tmp, "cmp.html")
        bounded.run([a.fsdp_inspect, one, "--compare", measured, "--html", cmp],
                       check=True, capture_output=True)
        dom = render(browser, cmp, os.path.join(tmp, "cmp.png"), 1400)
        text = re.sub(r"<[^>]+>", " ", dom)
        check("compare: measured lane and per-op table",
              "measured" in text and "Predicted against measured" in text and
              re.search(r"<td>matmul</td><td class=\"num\">[^<]+</td><td class=\"num\">[^<]+"
                        r"</td><td class=\"num\">[-+][0-9.]+%</td>", dom) is not None)
        # Autotune's candidates: why the chosen plan won.
        tuned, cands = os.path.join(tmp, "tuned.plan"), os.path.join(tmp, "cands.json")
        bounded.run([a.fsdp_opt] + common + ["-o", tuned, "--autotune",
                        "--memory-budget=500KiB", "--autotune-candidates=" + cands],
                       check=True, capture_output=True)
        tuned_page = os.path.join(tmp, "tuned.html")
        bounded.run([a.fsdp_inspect, tuned, "--candidates", cands, "--html", tuned_page],
                       check=True, capture_output=True)
        dom = render(browser, tuned_page, os.path.join(tmp, "tuned.png"), 1200)
        text = re.sub(r"<[^>]+>", " ", dom)
        m = re.search(r"(\d+) plans simulated: (\d+) fit the budget", text)
        check("candidates: the plans autotune weighed, against the budget",
              m is not None and int(m.group(1)) >= 2 and "budget 500.00 KiB" in text
              and "Chosen (red): the fastest that fits" in text
              and dom.count('class="chosen"') >= 1)
        bad = os.path.join(tmp, "bad.json")
        with open(bad, "w") as f:
            f.write('{"format": "fsdp-autotune-candidates", "budget_bytes": 1, '
                    '"candidates": [{"strategy": 3}]}')
        r = bounded.run([a.fsdp_inspect, tuned, "--candidates", bad, "--html", tuned_page],
                           capture_output=True, text=True)
        check("candidates: a bad file is an error naming the field",
              r.returncode == 1 and "candidates[0].strategy: expected a string" in r.stderr)
        if os.environ.get("INSPECT_PAGE_KEEP"):
            keep = os.environ["INSPECT_PAGE_KEEP"]
            os.makedirs(keep, exist_ok=True)
            for f in ("a.html", "a.png", "diff.html", "diff.png", "cmp.html", "cmp.png"):
                shutil.copy(os.path.join(tmp, f), keep)
    print(f"inspect_page: {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
