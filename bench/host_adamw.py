#!/usr/bin/env python3
"""The host AdamW rate per core, on this machine: fsdp-run's update of an
offloaded shard (fsdp.adamw on the host, one thread) against PyTorch's CPU
AdamW (torch 2.x: the default for-loop, foreach and fused), over the same
number of f32 elements. Each rate is in bytes per second as fsdp's cost
model counts an AdamW update (28 bytes an element: the gradient read, the
parameter and both moments read and written), so the figures are what the
simulator's `host_adamw_bytes_per_core` and `torch_host_adamw_bytes_per_core`
take (costmodel/DeviceModel.cpp cites the run).

    /opt/fsdp/torch2/bin/python bench/host_adamw.py \\
        --fsdp-opt build/tools/fsdp-opt --fsdp-run build/tools/fsdp-run

fsdp's figure comes from fsdp-run's measured trace of an MLP whose one
unit is offloaded (--offload=optimizer), world size 1, OMP_NUM_THREADS=1:
the median over steps of the adamw instructions' time. --json prints one
object.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

BYTES_PER_ELEMENT = 28  # fsdp's AdamWOp::getBytesMoved for f32


def torch_rates(numel, steps):
    import torch
    torch.set_num_threads(1)
    out = {}
    for name, kw in [("for-loop", {"foreach": False}), ("foreach", {"foreach": True}),
                     ("fused", {"fused": True})]:
        p = torch.nn.Parameter(torch.randn(numel))
        p.grad = torch.randn(numel)
        try:
            opt = torch.optim.AdamW([p], lr=1e-3, **kw)
            opt.step()  # state allocated
        except (RuntimeError, TypeError) as e:
            out[name] = {"error": str(e).splitlines()[0]}
            continue
        times = []
        for _ in range(steps):
            t0 = time.perf_counter()
            opt.step()
            times.append(time.perf_counter() - t0)
        s = statistics.median(times)
        out[name] = {"seconds": s, "bytes_per_second": numel * BYTES_PER_ELEMENT / s}
    out["torch"] = torch.__version__
    return out


def fsdp_rate(a, steps):
    # gen_model.py's MLP (its units' flat shards hold every trained element).
    dim = a.dim
    with tempfile.TemporaryDirectory() as d:
        onnx = os.path.join(d, "mlp.onnx")
        plan = os.path.join(d, "mlp.plan")
        trace = os.path.join(d, "trace.json")
        subprocess.run(["/usr/bin/python3", a.generator, "mlp", "--loss", "--dim", str(dim),
                        "--layers", "1", "--batch", "2", "-o", onnx],
                       check=True, capture_output=True)
        env = dict(os.environ, FSDP_DEVICE="cpu-generic", OMP_NUM_THREADS="1")
        subprocess.run([a.fsdp_opt, onnx, "--world-size=1", "--strategy=full-shard",
                        "--offload=optimizer", "--offload-update=after-backward", "-o", plan], check=True,
                       capture_output=True, env=env)
        elements = sum(f["shard_numel"] for f in json.load(open(plan))["flats"]
                       if f.get("trainable"))
        times = []
        for _ in range(steps):
            subprocess.run([a.fsdp_run, plan, "--steps", "2", "--trace", trace],
                           check=True, capture_output=True, env=env)
            events = json.load(open(trace))
            events = events.get("traceEvents", events)
            times.append(sum(e["dur"] * 1e-6 for e in events
                             if e.get("name") == "adamw" and e.get("ph") == "X"))
    s = statistics.median(times)
    return {"seconds": s, "elements": elements,
            "bytes_per_second": elements * BYTES_PER_ELEMENT / s}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fsdp-opt", default="build/tools/fsdp-opt")
    ap.add_argument("--fsdp-run", default="build/tools/fsdp-run")
    ap.add_argument("--generator", default="examples/gen_model.py")
    ap.add_argument("--dim", type=int, default=1024,
                    help="the MLP's width (1024: 12.6M trained elements)")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    fsdp = fsdp_rate(a, a.steps)
    result = {"fsdp": fsdp, "torch": torch_rates(fsdp["elements"], a.steps)}
    if a.json:
        print(json.dumps(result, indent=1))
        return
    f = result["fsdp"]
    print(f"one core, {f['elements']} f32 elements, {BYTES_PER_ELEMENT} bytes an element")
    print(f"  fsdp-run host adamw      {f['seconds'] * 1e3:8.1f} ms  "
          f"{f['bytes_per_second'] / 1e9:6.2f} GB/s")
    for name in ("for-loop", "foreach", "fused"):
        t = result["torch"][name]
        if "error" in t:
            print(f"  torch {name:<18} {t['error']}")
            continue
        print(f"  torch {result['torch']['torch']} {name:<8} {t['seconds'] * 1e3:8.1f} ms  "
              f"{t['bytes_per_second'] / 1e9:6.2f} GB/s")


if __name__ == "__main__":
    sys.exit(main())
