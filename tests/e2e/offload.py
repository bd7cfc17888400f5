#!/usr/bin/env python3
"""Offload plans train bit for bit like the plan without offload.

fsdp-run's CPU backend runs an offload plan with real copies between
distinct buffers (the host arena, the device arena, the shards and their
device copies), so a copy the plan forgot, one that lands late or a device
copy left stale trains a different model. For each case the losses and
gradient norms of every step and the final weights (fsdp-run --save-full)
must be identical, byte for byte, to the same plan without --offload:

- a bf16 Llama (gathered in bf16, so the device copy of `optimizer` is a
  bf16 copy the host casts) and an f32 GPT-2 with gradient clipping, on 1
  rank and on 2 (mpirun);
- --offload=optimizer, --offload=all, a per-unit mix, shares of units
  (MODE:FRACTION: the unit split in two flat buffers), FSDP2's
  CPUOffloadPolicy shape (--simulate-runtime=fsdp2-eager: f32 copied, cast
  on the device), and the update at the end of backward
  (--offload-update=after-backward) rather than before the next step's
  first use of the shard (the default: the update of step t runs in step
  t + 1, and before a checkpoint or an export);
- a cosine learning-rate schedule with warm-up (the update run a step late
  applies its own step's rate and bias correction);
- gradient accumulation (the update in its own program); SGD with
  momentum, shard-grad-op, and hybrid-shard over 4 ranks;
- a checkpoint at step 2 resumed to step 4 (the device copies refilled
  from the restored shards) equals 4 steps straight;
- --check-allocations: a step of an offload plan allocates no more than
  the plan's without offload (none, where the GEMM library allocates none);
- a step whose gradient norm is not finite skips every update, offloaded
  ones included;
- the emulated device backend (its host pool, its copies and host work in
  stream order, the deferred update replayed as a program of its own) trains
  each offload plan bit for bit like its own run of the plan without
  offload, on 1 and 2 ranks, and resumes from a checkpoint alike;
- a checkpoint saved with offload resumes without, and the other way, on
  both backends;
- host memory as each backend holds it within 3% of the plan's
  predicted.host_bytes;
- on one rank against the plan as compiled without --offload (one rank's
  full-shard plan uses parameters in place, with no shards: the norm must
  still round alike), GPT-2 with clipping at 0.5, 5 steps, and on two
  ranks; with fsdp-run and with each vector clone of the CPU kernels this
  CPU runs forced in turn (--fsdp-run-clone: fsdp-run-clone-N, the kernel
  sources built for AVX-512, AVX2 or the baseline alone).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bounded  # noqa: E402

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]
RESULTS = []
ENV = dict(os.environ, FSDP_DEVICE="cpu-generic")


def report(ok, message):
    RESULTS.append(bool(ok))
    print(f"{'PASS' if ok else 'FAIL'} {message}", flush=True)


def steps_of(log):
    with open(log) as f:
        return [(d["loss"], d["grad_norm"]) for d in map(json.loads, f) if "loss" in d]


def read_safetensors(blob):
    """name -> float32 array of a --save-full file's bytes."""
    import numpy as np
    n = int.from_bytes(blob[:8], "little")
    header = json.loads(blob[8:8 + n])
    out = {}
    for name, info in header.items():
        if name != "__metadata__":
            a, b = info["data_offsets"]
            out[name] = np.frombuffer(blob[8 + n + a:8 + n + b], np.float32)
    return out


def same_training(got, ref, share):
    """Identical bytes; for a share of a unit (its trained parameters in two
    flat buffers) the gradient norm sums the unit in two parts, so norms
    (and, with clipping, the scale and the weights) may differ in the last
    bits: losses and norms within 1e-6 of each step's (the first loss
    identical), weights within 1e-5 absolute, 1% of one step's update at the
    plans' lr of 1e-3 (AdamW turns the attention key bias's float-noise
    gradients into updates of any sign, so a last-bit change of the clipping
    scale moves those elements by up to 6e-7 in four steps)."""
    if got is None or ref is None:
        return False
    if got == ref:
        return True
    if not share or len(got[0]) != len(ref[0]) or got[0][0][0] != ref[0][0][0]:
        return False
    for (la, ga), (lb, gb) in zip(got[0], ref[0]):
        if abs(la - lb) > 1e-6 * abs(lb) or abs(ga - gb) > 1e-6 * abs(gb):
            return False
    wa, wb = read_safetensors(got[1]), read_safetensors(ref[1])
    return wa.keys() == wb.keys() and all(
        float(abs(wa[k] - wb[k]).max(initial=0)) <= 1e-5 for k in wb)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fsdp-opt", required=True)
    ap.add_argument("--fsdp-run", required=True)
    ap.add_argument("--generator", required=True)
    ap.add_argument("--fsdp-run-clone", action="append", default=[], metavar="N=PATH",
                    help="fsdp-run built on clone N of the CPU kernels alone (4, 3, 0)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        models = {
            "llama-bf16": (["llama", "--layers", "3"],
                           ["--param-dtype=bf16", "--compute-dtype=bf16"]),
            "gpt2-clip": (["gpt2", "--layers", "2", "--dim", "64", "--seq", "16",
                           "--vocab", "96", "--batch", "4"], ["--grad-clip=1.0"]),
            "gpt2-clip05": (["gpt2", "--layers", "4", "--dim", "64", "--batch", "8"],
                            ["--grad-clip=0.5"]),
        }
        count = [0]

        def plan(model, world, flags):
            count[0] += 1
            path = os.path.join(tmp, f"{model}-{count[0]}.plan")
            gen, base = models[model]
            bounded.run([a.fsdp_opt, os.path.join(tmp, model + ".onnx"), "-o", path,
                         f"--world-size={world}"] + base + flags,
                        check=True, capture_output=True, env=ENV)
            return path

        def train(path, world, steps, extra=(), binary=None):
            count[0] += 1
            log = os.path.join(tmp, f"run{count[0]}.jsonl")
            out = os.path.join(tmp, f"run{count[0]}.safetensors")
            cmd = [binary or a.fsdp_run, path, "--quiet", "--steps", str(steps), "--log", log,
                   "--save-full", out] + list(extra)
            if world > 1:
                cmd = MPIRUN + ["-np", str(world)] + cmd
            r = bounded.run(cmd, capture_output=True, text=True, env=ENV)
            if r.returncode != 0:
                return None, r.stderr[-800:]
            with open(out, "rb") as f:
                return (steps_of(log), f.read()), ""

        def resumed(first, second, straight, extra=()):
            """Whether `first` run 2 steps with a checkpoint, then `second`
            resumed from it to step 4, equals `straight` (4 steps of a plan
            without a resume): losses of steps 3-4 and the final weights."""
            count[0] += 1
            ck = os.path.join(tmp, f"ck{count[0]}")
            train(first, 2, 2, list(extra) + ["--checkpoint-dir", ck])
            got, err = train(second, 2, 4, list(extra) + ["--resume", ck])
            return (straight is not None and got is not None and got[1] == straight[1]
                    and got[0] == straight[0][2:]), err

        def allocations(path, world):
            """Heap allocations fsdp-run --check-allocations counts in step 2
            (0: none; some GEMM libraries' paths allocate on their own)."""
            cmd = [a.fsdp_run, path, "--quiet", "--steps", "2", "--check-allocations"]
            if world > 1:
                cmd = MPIRUN + ["-np", str(world)] + cmd
            r = bounded.run(cmd, capture_output=True, text=True, env=ENV)
            m = re.search(r"allocated heap memory (\d+) times", r.stderr)
            return int(m.group(1)) if m else (0 if r.returncode == 0 else -1)

        for model, (gen, _) in models.items():
            bounded.run(["/usr/bin/python3", a.generator] + gen +
                        ["--loss", "-o", os.path.join(tmp, model + ".onnx")], check=True,
                        capture_output=True)
        cases = [
            ("optimizer", ["--offload=optimizer"]),
            ("all", ["--offload=all"]),
            ("mix", ["--offload=optimizer,{0}0=all,{0}1=none"]),
            # A share of each unit (its last parameters in a flat buffer
            # of their own), and of one unit with everything on the host.
            ("share", ["--offload=optimizer:0.5,{0}0=all:0.3"]),
            ("fsdp2-shape", ["--offload=all", "--simulate-runtime=fsdp2-eager"]),
            ("optimizer after-backward",
             ["--offload=optimizer", "--offload-update=after-backward"]),
        ]
        # The plan as compiled (on one rank: parameters in place, no
        # shards) against the same with offload, on fsdp-run and on each
        # forced clone this CPU runs.
        binaries = [("fsdp-run", a.fsdp_run)]
        for spec in a.fsdp_run_clone:
            clone, path = spec.split("=", 1)
            # fsdp-run-clone-N exits 77 on a CPU that cannot run clone N
            # (tests/unit/OneClone.h).
            if bounded.run([path, "--help"], capture_output=True).returncode == 77:
                print(f"skipped: this CPU cannot run clone {clone} of the kernels")
            else:
                binaries.append((f"clone {clone}", path))
        for label, binary in binaries:
            for world in (1, 2):
                ref, err = train(plan("gpt2-clip05", world, []), world, 5, binary=binary)
                for mode in ("all", "optimizer"):
                    got, err2 = train(plan("gpt2-clip05", world, [f"--offload={mode}"]), world,
                                      5, binary=binary)
                    report(ref is not None and got == ref,
                           f"{label}: gpt2 4 layers clip 0.5 x{world} --offload={mode}: "
                           f"5 steps identical to the plan as compiled without offload"
                           + ("" if got is None or ref is None or got[0] == ref[0] else
                              f" (losses {got[0]} vs {ref[0]})") + f" {err} {err2}")

        for model in ("llama-bf16", "gpt2-clip"):
            for world in (1, 2):
                # One rank: the sharded schedule, as offload keeps it (not the
                # no-shard one, whose gradient norm sums in another order).
                one = ["--reshard-after-forward=true"] if world == 1 else []
                base = plan(model, world, one)
                ref, err = train(base, world, 4)
                if ref is None:
                    report(False, f"{model} x{world} without offload: {err}")
                    continue
                for name, flags in cases:
                    prefix = "layers." if model.startswith("llama") else "h."
                    offloaded = plan(model, world, one + [f.format(prefix) for f in flags])
                    got, err = train(offloaded, world, 4)
                    if name == "optimizer":
                        before, after = allocations(base, world), allocations(offloaded, world)
                        report(after == before and after >= 0,
                               f"{model} x{world} optimizer offload allocates in a step no "
                               f"more than without ({after} against {before})")
                    report(same_training(got, ref, name == "share"),
                           f"{model} x{world} {name}: losses, gradient norms and "
                           f"final weights identical to the plan without offload"
                           + (" (the norm within 1e-6)" if name == "share" else "")
                           + (f" ({err})" if got is None else
                              "" if got == ref else f" (losses {got[0]} vs {ref[0]})"))

        # Other optimizers and strategies: SGD with momentum, shard-grad-op,
        # hybrid-shard over 4 ranks.
        for world, extra in [(2, ["--optimizer=sgd", "--momentum=0.9"]),
                             (2, ["--strategy=shard-grad-op"]),
                             (4, ["--strategy=hybrid-shard", "--replicate-groups=2"])]:
            ref, _ = train(plan("llama-bf16", world, extra), world, 3)
            for mode in ("optimizer", "all"):
                got, err = train(plan("llama-bf16", world, extra + [f"--offload={mode}"]),
                                 world, 3)
                report(ref is not None and got == ref,
                       f"llama-bf16 x{world} {' '.join(extra)} {mode} offload identical {err}")

        # Gradient accumulation: the update is a program of its own.
        ref, _ = train(plan("llama-bf16", 2, ["--grad-accum=2"]), 2, 3)
        got, err = train(plan("llama-bf16", 2, ["--grad-accum=2", "--offload=optimizer"]), 2, 3)
        report(ref is not None and got == ref,
               f"llama-bf16 x2 grad-accum 2 optimizer offload identical {err}")

        # A learning-rate schedule: the update run in the next step applies
        # its own step's rate and bias correction.
        sched = ["--lr-schedule=cosine", "--warmup-steps=2", "--total-steps=5"]
        ref, _ = train(plan("gpt2-clip", 2, sched), 2, 5)
        got, err = train(plan("gpt2-clip", 2, sched + ["--offload=all"]), 2, 5)
        report(ref is not None and got == ref,
               f"gpt2-clip x2 cosine schedule with warm-up, all offloaded: identical {err}")

        # A checkpoint resumed: the pending update is applied before the
        # save, and the device copies are refilled from the restored shards.
        p = plan("llama-bf16", 2, ["--offload=optimizer"])
        ok, err = resumed(p, p, train(p, 2, 4)[0])
        report(ok, f"llama-bf16 x2 optimizer offload: resumed at step 2 to step 4 equals "
               f"4 steps straight {err}")

        # Host memory, predicted (plan.predicted.host_bytes: offloaded
        # shards, their optimizer state, the host arena and buffers)
        # against what each backend holds for it (fsdp-run's log,
        # host_bytes), within 3%.
        for flags in (["--offload=optimizer"], ["--offload=all"],
                      ["--offload=optimizer:0.5"], ["--offload=optimizer", "--grad-accum=2"]):
            path = plan("llama-bf16", 2, flags)
            with open(path) as f:
                predicted = json.load(f)["predicted"]["host_bytes"]
            for backend in ("cpu", "emulated"):
                count[0] += 1
                log = os.path.join(tmp, f"host{count[0]}.jsonl")
                r = bounded.run(MPIRUN + ["-np", "2", a.fsdp_run, path, "--quiet", "--steps",
                                          "2", "--backend", backend, "--log", log],
                                capture_output=True, text=True, env=ENV)
                measured = -1
                if r.returncode == 0:
                    with open(log) as f:
                        measured = [json.loads(l) for l in f][-1].get("host_bytes", -1)
                report(predicted > 0 and abs(measured - predicted) <= 0.03 * predicted,
                       f"{backend} llama-bf16 x2 {' '.join(flags)}: host memory measured "
                       f"{measured} bytes against {predicted} predicted")

        # A checkpoint resumed across the two placements: saved by the plan
        # with offload (its pending update applied first) and resumed by the
        # plan without, and the other way (the device copies refilled from
        # the restored shards), equal 4 steps straight.
        for backend in ("cpu", "emulated"):
            be = ["--backend", backend]
            with_offload = plan("llama-bf16", 2, ["--offload=optimizer"])
            without = plan("llama-bf16", 2, [])
            straight, _ = train(without, 2, 4, be)
            for first, second, what in [(with_offload, without, "offloaded to on the device"),
                                        (without, with_offload, "on the device to offloaded")]:
                ok, err = resumed(first, second, straight, be)
                report(ok, f"{backend} llama-bf16 x2: a checkpoint at step 2 {what}, resumed "
                       f"to step 4, equals 4 steps straight {err}")

        # A step whose gradient norm is not finite (an infinity in the
        # second batch's images): its update is skipped, the offloaded ones
        # too, and the fused copy of each unchanged shard still reaches its
        # device copy (a skipped AdamW that wrote none left the host arena's
        # last copy, another unit's, to be copied there: the steps after
        # trained other weights).
        models["vit"] = (["vit", "--layers", "2"], [])
        bounded.run(["/usr/bin/python3", a.generator, "vit", "--layers", "2", "--loss",
                     "-o", os.path.join(tmp, "vit.onnx")], check=True, capture_output=True)
        npz = os.path.join(tmp, "vit.npz")
        bounded.run(["/usr/bin/python3", "-c",
                     "import numpy as np, sys\n"
                     "r = np.random.default_rng(0)\n"
                     "x = r.standard_normal((16, 3, 16, 16)).astype(np.float32)\n"
                     "x[5, 0, 0, 0] = np.inf\n"
                     "np.savez(sys.argv[1], x=x, targets=r.integers(0, 10, 16))\n", npz],
                    check=True)
        data = ["--data", npz, "--on-nonfinite=skip"]
        for backend in ("cpu", "emulated"):
            extra = data + ["--backend", backend]
            ref, err = train(plan("vit", 2, []), 2, 4, extra)
            # (A non-finite value is logged as a string: "nan", "inf".)
            skipped = ref is not None and [isinstance(g, float) for _, g in ref[0]] == \
                [True, False, True, True]
            got, err2 = train(plan("vit", 2, ["--offload=optimizer"]), 2, 4, extra)
            report(skipped and got == ref,
                   f"{backend} vit x2: the second step is not finite and skipped "
                   f"({skipped}), the steps after it and the weights identical with "
                   f"optimizer offload {err} {err2}")

        # The emulated device backend: each offload plan against its own run
        # of the plan without offload.
        emulated = ["--backend", "emulated"]
        for model, world, cases_here in [
                ("llama-bf16", 1, ["optimizer", "all", "optimizer after-backward"]),
                ("llama-bf16", 2, ["optimizer", "all", "mix", "share", "fsdp2-shape"]),
                ("gpt2-clip", 2, ["optimizer", "optimizer after-backward"])]:
            one = ["--reshard-after-forward=true"] if world == 1 else []
            ref, err = train(plan(model, world, one), world, 3, emulated)
            if ref is None:
                report(False, f"emulated {model} x{world} without offload: {err}")
                continue
            for name, flags in cases:
                if name not in cases_here:
                    continue
                prefix = "layers." if model.startswith("llama") else "h."
                offloaded = plan(model, world, one + [f.format(prefix) for f in flags])
                got, err = train(offloaded, world, 3, emulated)
                report(same_training(got, ref, name == "share"),
                       f"emulated {model} x{world} {name}: identical to the emulated "
                       f"plan without offload" + (f" ({err})" if got is None else
                       "" if got == ref else f" (losses {got[0]} vs {ref[0]})"))
        ref, _ = train(plan("llama-bf16", 2, ["--grad-accum=2"]), 2, 3, emulated)
        got, err = train(plan("llama-bf16", 2, ["--grad-accum=2", "--offload=optimizer"]),
                         2, 3, emulated)
        report(ref is not None and got == ref,
               f"emulated llama-bf16 x2 grad-accum 2 optimizer offload identical {err}")
        p = plan("llama-bf16", 2, ["--offload=optimizer"])
        ok, err = resumed(p, p, train(p, 2, 4, emulated)[0], emulated)
        report(ok, f"emulated llama-bf16 x2 optimizer offload: resumed at step 2 to step 4 "
               f"equals 4 steps straight {err}")
    print(f"offload: {sum(RESULTS)} of {len(RESULTS)} passed")
    return 0 if all(RESULTS) else 1


if __name__ == "__main__":
    sys.exit(main())
