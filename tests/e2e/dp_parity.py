#!/usr/bin/env python3
"""Data parallelism over MPI: N ranks with batch B equal 1 rank with N*B.

The same model (weights from one export), the same global batches from one
.npz, 10 AdamW steps, world sizes 1, 2 and 4 (mpirun, oversubscribed on
this machine's cores), for every strategy (full-shard, shard-grad-op,
no-shard, and hybrid-shard with 2 replica groups on 2 and 4 ranks), reshard_after_forward true and false, each wrap policy and a
frozen parameter, activation checkpointing, bf16 parameters (against the
1-rank bf16 run, itself within 1e-3 of the f32 losses): every step's loss and the final weights must agree with
the 1-rank no-shard run (which parity.py checks against PyTorch) within
1e-5 relative L2. Sharding changes only where sums happen (reduce-scatter
vs all-reduce, the norm's partial sums), so the differences are float32
reassociation, ~1e-7. As in parity.py, elements
whose gradient is zero in exact arithmetic (attention key biases) are left
out of the weight comparison: AdamW turns float32 noise there into updates.
Also: a plan that differs between ranks is an error on every rank, and a
rank that dies makes the others exit non-zero within the comm timeout, under
mpirun and under the real torchrun (Gloo collectives, no MPI); and where
the ranks cannot share memory (/dev/shm read-only, or missing on one rank:
no_shm.sh), both say so and train over Gloo's TCP.
"""
import argparse
import json
import os
import shutil
import subprocess
import bounded  # subprocess.run with a deadline
import sys
import tempfile
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from parity import load_generator, read_safetensors, rel  # noqa: E402

TOL = 1e-5
BF16_TOL = 1e-4
# bf16 weights (8 significant bits, relative rounding <= 2^-9) against the
# f32 run: measured ~2e-5 on the losses over 10 steps; 1e-3 leaves margin and
# still catches a wrong cast or gather (errors of O(1)).
BF16_LOSS_TOL = 1e-3
# bf16 reduction: the gradient sums themselves round to 8 bits, in an order
# that depends on the world size, so runs on 2 and 4 ranks differ from the
# 1-rank run by a few bf16 steps of the gradient (AdamW then moves weights
# by up to lr per step where a gradient is tiny).
BF16_REDUCE_TOL = 1e-2
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]


PORT = 29600 + os.getpid() % 2000
TORCHRUN = ["/usr/bin/python3", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                             "scripts", "torchrun.py")]


def torchrun(cmd, world, env_extra=None, timeout=180, standalone=False):
    """The real torchrun (torch.distributed.run, through scripts/torchrun.py,
    which works around Debian's defect in its output redirection): static
    rendezvous, so the ranks meet through the agent's own TCPStore, or
    --standalone, where rank 0 serves the store. No MPI: Gloo collectives.
    Returns torchrun's exit code and the workers' combined output."""
    global PORT
    PORT += 2
    rdzv = ["--standalone"] if standalone else ["--master_addr", "127.0.0.1",
                                                 "--master_port", str(PORT)]
    r = bounded.run(TORCHRUN + ["--nproc_per_node", str(world)] + rdzv + ["--no_python"] + cmd,
                       env=dict(os.environ, **(env_extra or {})), capture_output=True, text=True,
                       timeout=timeout)
    if env_extra is None and r.returncode != 0:
        raise RuntimeError("torchrun failed: " + r.stderr[-3000:])
    return r.returncode, r.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fsdp-opt", required=True)
    ap.add_argument("--fsdp-run", required=True)
    ap.add_argument("--generator", required=True)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("cases", nargs="*", help="only these cases (default: all)")
    a = ap.parse_args()
    gen = load_generator(a.generator)
    failures = total = 0
    first_weights = {}  # by case: the export every run of it starts from
    with tempfile.TemporaryDirectory() as tmp:
        # Each case: the generator's arguments, training flags, and the
        # sharding configurations compared with the 1-rank no-shard run.
        gpt2_configs = [
            ["--strategy=full-shard"],
            ["--strategy=full-shard", "--reshard-after-forward=false"],
            ["--strategy=full-shard", "--reshard-after-forward=true"],
            ["--strategy=shard-grad-op"],
            ["--strategy=no-shard"],
            ["--strategy=full-shard", "--wrap=size:5000"],
            ["--strategy=full-shard", "--wrap=none"],
            ["--strategy=full-shard", "--frozen=^wpe"],
            ["--strategy=full-shard", "--backward-prefetch=post", "--prefetch-depth=2"],
            ["--strategy=full-shard", "--forward-prefetch=false", "--backward-prefetch=none"],
            ["--strategy=full-shard", "--activation-checkpointing=units"],
            ["--strategy=hybrid-shard", "--replicate-groups=2"],
            ["--strategy=full-shard", "--param-dtype=bf16"],
            ["--strategy=full-shard", "--param-dtype=bf16", "--reduce-dtype=bf16"],
            # FSDP2's integer form: keep 1/2 after forward, regather among 2.
            ["--strategy=full-shard", "--reshard-after-forward=2"],
            ["--strategy=full-shard", "--reshard-after-forward=true,h.0=false,root=true"],
            # What --autotune emits: merged units, per-unit checkpointing.
            ["--strategy=full-shard", "--merge-units=2", "--activation-checkpointing=h.0+h.1",
             "--reshard-after-forward=false,h.0+h.1=true"],
            # Launched by torchrun (no MPI): collectives over Gloo.
            ["--strategy=full-shard", "torchrun"],
            ["--strategy=hybrid-shard", "--replicate-groups=2", "torchrun"],
            ["--strategy=full-shard", "--reshard-after-forward=2", "torchrun"],  # block groups
            ["--strategy=full-shard", "--param-dtype=bf16", "--reduce-dtype=bf16", "torchrun"],
            # Ranks on one host meet in shared memory; "tcp" makes them use
            # Gloo's TCP transport instead (FSDP_GLOO_SHM=0), as across hosts.
            ["--strategy=hybrid-shard", "--replicate-groups=2", "torchrun", "tcp"],
        ]
        llama_configs = [["--strategy=full-shard"], ["--strategy=shard-grad-op"],
                         ["--strategy=no-shard"],
                         ["--strategy=full-shard", "--activation-checkpointing=units"],
                         ["--strategy=hybrid-shard", "--replicate-groups=2"]]
        # GPT-2 ties its embeddings; a vocabulary of 97 divides by no world size.
        # nanoGPT's pattern: a causal-mask buffer in every block, merged by
        # the exporter into one initializer named for block 0; the default
        # wrap policy must still find the blocks (one unit each).
        nano_configs = [["--strategy=full-shard"],
                        ["--strategy=full-shard", "--activation-checkpointing=units"]]
        cases = [("gpt2", ["gpt2", "--loss", "--vocab", "97"], {}, gpt2_configs),
                 ("nanogpt-mask-buffer", ["gpt2", "--loss", "--mask-buffer"], {}, nano_configs),
                 # torch's own nn.TransformerEncoder: a unit per layer.
                 ("torch-encoder", ["encoder", "--loss"], {}, [["--strategy=full-shard"]]),
                 # torchvision's VisionTransformer: a unit per encoder_layer_N.
                 ("torchvision-vit", ["vit", "--loss"], {}, [["--strategy=full-shard"]]),
                 ("llama-clip-accum", ["llama", "--loss"], {"grad-clip": 0.5, "grad-accum": 2},
                  llama_configs)]
        for name, gen_args, opts, configs in cases:
            if a.cases and name not in a.cases:
                continue
            flags = [f"--{k}={v}" for k, v in opts.items()]
            accum = opts.get("grad-accum", 1)
            global_batch = 4
            args = gen.parse_args(gen_args + ["--batch", str(global_batch * a.steps * accum)])
            _, data = gen.build(args)
            npz = os.path.join(tmp, name + ".npz")
            np.savez(npz, **{n: t.numpy() for n, t in data.items()})
            weights = None
            models = {}
            for world in (1, 2, 4):
                args = gen.parse_args(gen_args + ["--batch", str(global_batch // world)])
                model, inputs = gen.build(args)
                onnx_path = os.path.join(tmp, f"{name}-{world}.onnx")
                torch.onnx.export(model, tuple(inputs.values()), onnx_path,
                                  input_names=list(inputs), output_names=["loss"],
                                  opset_version=17, do_constant_folding=False)
                weights = weights or onnx_path  # every run starts from these
                first_weights.setdefault(name, weights)
                models[world] = onnx_path

            def train(world, config, tag):
                plan = os.path.join(tmp, f"{name}-{world}-{tag}.plan")
                bounded.run([a.fsdp_opt, models[world], "-o", plan, f"--world-size={world}"]
                               + flags + [c for c in config if c not in ("torchrun", "tcp")],
                               check=True,
                               stderr=subprocess.DEVNULL)
                log = os.path.join(tmp, f"{name}-{world}-{tag}.jsonl")
                out = os.path.join(tmp, f"{name}-{world}-{tag}.safetensors")
                grads = os.path.join(tmp, f"{name}-{world}-{tag}.grads.safetensors")
                cmd = [a.fsdp_run, plan, "--weights", weights, "--data", npz, "--steps",
                       str(a.steps), "--log", log, "--save-full", out, "--dump-grads", grads,
                       "--quiet"]
                if "torchrun" in config:
                    code, err = torchrun(cmd, world,
                                         {"FSDP_GLOO_SHM": "0"} if "tcp" in config else None,
                                         standalone=world == 4)
                    if code != 0:
                        raise RuntimeError("torchrun failed: " + err[-3000:])
                else:
                    bounded.run((MPIRUN + ["-np", str(world)] if world > 1 else []) + cmd,
                                   check=True)
                return ([json.loads(l)["loss"] for l in open(log)],
                        read_safetensors(out), read_safetensors(grads))

            # The reference: one rank, no sharding (itself checked against
            # PyTorch by parity.py).
            base_losses, base_w, base_g = train(1, ["--strategy=no-shard"], "base")
            largest = max(float(np.abs(g).max()) for g in base_g.values())
            for ci, config in enumerate(configs):
                frozen = [c for c in config if c.startswith("--frozen")]
                bf16 = "--param-dtype=bf16" in config
                bf16_reduce = "--reduce-dtype=bf16" in config
                if frozen:  # another training problem: its own reference
                    ref_losses, ref_w, ref_g = train(1, ["--strategy=no-shard"] + frozen, f"ref{ci}")
                elif bf16:
                    # Mixed precision: the reference is the 1-rank bf16 run;
                    # it must itself follow the f32 losses closely.
                    ref_losses, ref_w, ref_g = train(1, config, f"ref{ci}")
                    err = rel(ref_losses, base_losses)
                    ok = err <= BF16_LOSS_TOL
                    failures += not ok
                    total += 1
                    print(f"{'PASS' if ok else 'FAIL'} {name} {' '.join(config)} world size 1: "
                          f"losses {err:.1e} from f32 (tolerance {BF16_LOSS_TOL})")
                else:
                    ref_losses, ref_w, ref_g = base_losses, base_w, base_g
                # Hybrid: 2 replica groups, so 2 ranks (shard groups of 1)
                # and 2x2.
                hybrid = "--strategy=hybrid-shard" in config
                partial = "--reshard-after-forward=2" in config or "torchrun" in config
                for world in ((2, 4) if hybrid or bf16 or partial else (1, 2, 4)):
                    losses, w, _ = train(world, config, f"c{ci}")
                    loss_err = rel(losses, ref_losses)
                    werr = 0.0
                    for k, v in ref_w.items():
                        keep = (np.abs(ref_g[k]) >= 1e-6 * largest if k in ref_g
                                else np.ones(v.shape, bool))
                        werr = max(werr, rel(w[k][keep], v[keep]) if keep.any() else 0.0)
                    # bf16 runs against the 1-rank bf16 run: the f32 master
                    # weights differ across world sizes by reassociation
                    # (~1e-7), which now and then moves a weight across a
                    # bf16 rounding boundary (a 2^-9 relative step), so the
                    # bound is looser than f32's.
                    tol = (BF16_REDUCE_TOL if bf16_reduce else BF16_TOL) if bf16 else TOL
                    ok = loss_err <= tol and werr <= tol
                    failures += not ok
                    total += 1
                    print(f"{'PASS' if ok else 'FAIL'} {name} {' '.join(config)} world size {world}: "
                          f"losses {loss_err:.1e}, final weights {werr:.1e} vs 1 rank "
                          f"{'bf16' if bf16 else 'no-shard'} "
                          f"(relative L2, tolerance {tol})")

        if "gpt2" not in first_weights:  # the fault cases run on its plans
            print(f"data-parallel: {total - failures} passed, {failures} failed")
            return 1 if failures else 0
        # A plan that differs between ranks: an error on every rank, no hang.
        p1, p2 = (os.path.join(tmp, f"gpt2-{w}-c0.plan") for w in (2, 4))
        r = bounded.run(MPIRUN + ["-np", "2", "sh", "-c",
                                     f'if [ "$OMPI_COMM_WORLD_RANK" = 0 ]; then exec {a.fsdp_run} {p1}; '
                                     f'else exec {a.fsdp_run} {p2}; fi'],
                           capture_output=True, text=True, timeout=60)
        msgs = r.stderr.count("the plan (")
        ok = r.returncode != 0 and msgs == 2
        failures += not ok
        total += 1
        print(f"{'PASS' if ok else 'FAIL'} mismatched plans: exit {r.returncode}, "
              f"{msgs} of 2 ranks report it")
        # The same under torchrun.
        code, err = torchrun(["sh", "-c", f'if [ "$RANK" = 0 ]; then exec {a.fsdp_run} {p1}; '
                                          f'else exec {a.fsdp_run} {p2}; fi'], 2, {})
        msgs = err.count("the plan (")
        ok = code != 0 and msgs == 2
        failures += not ok
        total += 1
        print(f"{'PASS' if ok else 'FAIL'} mismatched plans under torchrun: exit {code}, "
              f"{msgs} of 2 ranks report it")

        plan = os.path.join(tmp, "gpt2-2-c0.plan")
        weights = first_weights["gpt2"]
        # Shared memory refused (a read-only /dev/shm on every rank; or rank
        # 0 makes the segment and rank 1 cannot open it): every rank says
        # so and all fall back to Gloo's TCP, training as the mpirun run of
        # the same plan did.
        mpi_losses = [json.loads(l)["loss"] for l in open(os.path.join(tmp, "gpt2-2-c0.jsonl"))]
        wrapper = os.path.join(os.path.dirname(os.path.abspath(__file__)), "no_shm.sh")
        namespaces = shutil.which("unshare") is not None and subprocess.run(
            ["unshare", "-m", "true"], capture_output=True).returncode == 0
        if not namespaces:
            print("SKIP shared memory refused: no mount namespace here (unshare -m)")
        for mode in ("all", "rank1") if namespaces else ():
            log = os.path.join(tmp, f"gpt2-noshm-{mode}.jsonl")
            code, err = torchrun([wrapper, mode, a.fsdp_run, plan, "--weights", weights,
                                  "--data", os.path.join(tmp, "gpt2.npz"), "--steps",
                                  str(a.steps), "--log", log, "--quiet"], 2, {})
            said = err.count("no shared memory between the ranks")
            loss_err = rel([json.loads(l)["loss"] for l in open(log)], mpi_losses) \
                if code == 0 else float("inf")
            ok = code == 0 and said == 2 and loss_err <= TOL
            failures += not ok
            total += 1
            print(f"{'PASS' if ok else 'FAIL'} shared memory refused ({mode}): exit {code}, "
                  f"{said} of 2 ranks fall back to TCP, losses {loss_err:.1e} from mpirun's"
                  + ("" if ok else ": " + err[-1500:]))
        # A rank that dies: the others exit non-zero, quickly.
        env = dict(os.environ, FSDP_FAULT_RANK="1", FSDP_FAULT_STEP="3")
        start = time.time()
        r = bounded.run(MPIRUN + ["-np", "2", a.fsdp_run, plan, "--weights", weights,
                                     "--steps", "50", "--comm-timeout", "10", "--quiet"],
                           capture_output=True, text=True, env=env, timeout=120)
        took = time.time() - start
        # It must die of the injected fault, not of a bad setup.
        ok = r.returncode != 0 and took < 30 and "initializer" not in r.stderr
        failures += not ok
        total += 1
        print(f"{'PASS' if ok else 'FAIL'} a rank dies at step 3: the job exits {r.returncode} "
              f"after {took:.1f} s")
        # The same under torchrun: rank 0 sees its peer's connection close
        # and fails at once, before torchrun's monitor (every 5 s) would
        # stop it.
        start = time.time()
        code, err = torchrun(
            [a.fsdp_run, plan, "--weights", weights, "--steps", "50", "--comm-timeout",
             "10", "--quiet"], 2, {"FSDP_FAULT_RANK": "1", "FSDP_FAULT_STEP": "3"})
        took = time.time() - start
        ok = code != 0 and took < 30 and "rank 0: " in err and "failed:" in err
        failures += not ok
        total += 1
        print(f"{'PASS' if ok else 'FAIL'} a rank dies at step 3 (Gloo, torchrun): exit {code} "
              f"after {took:.1f} s" + ("" if ok else ": " + err[-1500:]))
    print(f"data-parallel: {total - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
