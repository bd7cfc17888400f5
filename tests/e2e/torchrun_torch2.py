#!/usr/bin/env python3
"""fsdp-run under torch 2.x's torchrun (issue 38): the agent's TCPStore
speaks torch 2.x's protocol (VALIDATE first, queries numbered one higher
than 1.13's), which fsdp-run's store client finds by a probe. A GPT-2 plan
on 2 ranks under torch 2.x's torchrun (static rendezvous: the agent's
store; and --standalone: rank 0 serves fsdp-run's own) must log the losses
mpirun's run logs.

    /opt/fsdp/torch2/bin/python tests/e2e/torchrun_torch2.py \\
        --fsdp-opt build/tools/fsdp-opt --fsdp-run build/tools/fsdp-run \\
        --generator examples/gen_model.py
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]


def losses(path):
    return [json.loads(x)["loss"] for x in open(path)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fsdp-opt", required=True)
    ap.add_argument("--fsdp-run", required=True)
    ap.add_argument("--generator", required=True)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        model, plan = os.path.join(tmp, "gpt2.onnx"), os.path.join(tmp, "gpt2.plan")
        subprocess.run(["/usr/bin/python3", a.generator, "gpt2", "--loss", "--dynamic-batch",
                        "-o", model], check=True,
                       capture_output=True)
        subprocess.run([a.fsdp_opt, model, "--batch-size=4", "--world-size=2", "-o", plan],
                       check=True, capture_output=True)
        run = [a.fsdp_run, plan, "--steps", "3", "--quiet", "--log"]
        ref = os.path.join(tmp, "mpi.jsonl")
        subprocess.run(MPIRUN + ["-np", "2"] + run + [ref], check=True, timeout=300)
        failed = []
        for name, extra in (("agent store", ["--master-port", "26851"]),
                            ("--standalone", ["--standalone"])):
            log = os.path.join(tmp, name.strip("-").replace(" ", "_") + ".jsonl")
            # `--` ends torchrun's options: torch 2.x's parser takes --log as
            # an abbreviation of its own --log-dir otherwise.
            cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2"] + \
                extra + ["--no-python", "--"] + run + [log]
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            if r.returncode != 0:
                print(f"FAIL {name}: exit {r.returncode}\n{r.stderr[-1500:]}")
                failed.append(name)
                continue
            got, want = losses(log), losses(ref)
            ok = got == want
            print(f"{'ok' if ok else 'FAIL'} torch 2.x torchrun ({name}): losses {got}"
                  f"{'' if ok else ' against mpirun ' + str(want)}", flush=True)
            failed += [] if ok else [name]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
