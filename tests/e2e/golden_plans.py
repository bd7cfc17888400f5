"""Plans of a fixed set of models, against the ones kept in tests/golden/.

A refactor of the compiler must not change what it plans: every field of
each plan must equal the kept one (floats within 1e-9 relative: libm may
round the simulator's last bit differently on a CPU with FMA). The paths
of the model (meta.source, meta.source_base) and the digest that seals
them are left out. When a change to the plans is intended, rewrite the
kept ones with --update and say why in the commit.

    golden_plans.py --fsdp-opt build/tools/fsdp-opt --generator examples/gen_model.py [--update]
"""
import argparse
import gzip
import json
import os
import sys
import tempfile

import bounded  # subprocess.run with a deadline

GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "golden")
DEVICE = ["--device=h100-sxm"]  # a fixed device model (the default may be this CPU)

# name -> (gen_model.py arguments, fsdp-opt flags)
CASES = {
    "gpt2": (["gpt2", "--loss"], []),
    "llama": (["llama", "--loss"], []),
    "convnet": (["convnet", "--loss"], []),
    "resnet18": (["resnet18", "--loss", "--image", "32", "--training-mode"], []),
    "gpt2-2ranks": (["gpt2", "--loss"], ["--world-size=2"]),
    "llama-hybrid": (["llama", "--loss"], ["--world-size=4", "--strategy=hybrid-shard",
                                           "--replicate-groups=2"]),
    "gpt2-autotune": (["gpt2", "--loss", "--layers", "4"],
                      ["--world-size=2", "--autotune", "--memory-budget=700KiB"]),
    "llama-bf16": (["llama", "--loss"], ["--world-size=2", "--compute-dtype=bf16",
                                         "--param-dtype=bf16"]),
}


def normalised(path):
    with open(path) as f:
        plan = json.load(f)
    plan.pop("digest", None)
    for key in ("source", "source_base"):
        plan.get("meta", {}).pop(key, None)
    return plan


def first_difference(a, b, where="plan"):
    """The path of the first field where `a` and `b` differ, or None."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                return f"{where}.{k} ({'added' if k not in b else 'removed'})"
            d = first_difference(a[k], b[k], f"{where}.{k}")
            if d:
                return d
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{where}: {len(a)} entries, kept {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            d = first_difference(x, y, f"{where}[{i}]")
            if d:
                return d
        return None
    if isinstance(a, float) or isinstance(b, float):
        if isinstance(a, (int, float)) and isinstance(b, (int, float)) and \
                abs(a - b) <= 1e-9 * max(abs(a), abs(b), 1e-300):
            return None
    if a != b:
        return f"{where}: {json.dumps(a)[:120]} (kept: {json.dumps(b)[:120]})"
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fsdp-opt", required=True)
    ap.add_argument("--generator", required=True)
    ap.add_argument("--update", action="store_true", help="rewrite the kept plans")
    a = ap.parse_args()
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        models = {}
        for name, (gen, flags) in CASES.items():
            key = " ".join(gen)
            if key not in models:
                models[key] = os.path.join(tmp, f"m{len(models)}.onnx")
                bounded.run(["/usr/bin/python3", a.generator] + gen + ["-o", models[key]],
                            check=True, capture_output=True)
            plan = os.path.join(tmp, name + ".plan")
            bounded.run([a.fsdp_opt, models[key], "-o", plan] + DEVICE + flags,
                        check=True, capture_output=True)
            got = normalised(plan)
            kept_path = os.path.join(GOLDEN, name + ".plan.json.gz")
            if a.update:
                with gzip.open(kept_path, "wt") as f:
                    json.dump(got, f, sort_keys=True, separators=(",", ":"))
                print(f"kept {name}")
                continue
            if not os.path.exists(kept_path):
                print(f"FAIL {name}: no kept plan ({kept_path}; --update writes it)")
                failed += 1
                continue
            with gzip.open(kept_path, "rt") as f:
                kept = json.load(f)
            diff = first_difference(got, kept)
            print(f"{'FAIL' if diff else 'same'} {name}" + (f": {diff}" if diff else ""))
            failed += bool(diff)
    print(f"golden plans: {len(CASES) - failed} same, {failed} differ")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
