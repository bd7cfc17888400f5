"""The torchvision classification zoo through the tracer (issue 37.2).

Each builder of torchvision.models with num_classes=10, in training mode,
dropout and stochastic depth set to 0, on a batch of 4 small images (the
smallest each accepts): traced with its cross-entropy loss, compiled,
run one step on one rank (--world-size 1) and, with --ranks 2, on two
under mpirun with the batch split between them (SyncBatchNorm, so the
statistics are the global batch's); the gradients judged against PyTorch
float64 relative to PyTorch float32's own error, as the OpInfo suite does
(opinfo.py), the 2-rank gradients against the 1-rank ones, and the
2-rank plan's predicted peak against the 1-rank one at the same local
batch.

    zoo.py --fsdp-opt build/tools/fsdp-opt --fsdp-run build/tools/fsdp-run
           [--only resnet18,...] [--max-params 30e6] [--ranks 2]

Prints one line a model and the table of what trains, what is refused and
why. Models above --max-params are listed as skipped (their step takes
minutes on two cores).
"""
import argparse
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import torchvision.models as tvm  # noqa: E402

import bounded  # noqa: E402
import fsdp_trace  # noqa: E402
from parity import read_safetensors  # noqa: E402

TOLERANCE_FACTOR, FLOOR = 10.0, 1e-4
BATCH = 4  # 2 a rank on two ranks
# Smallest inputs the architectures accept (their own downsampling).
IMAGE = {"inception_v3": 75, "googlenet": 32, "alexnet": 63, "maxvit_t": 224,
         "swin": 32, "vit": 224, "regnet": 32}
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]


def builders():
    return sorted(n for n in dir(tvm) if n[0].islower() and callable(getattr(tvm, n))
                  and not n.startswith("get") and n != "list_models")


def build(name, dtype):
    torch.manual_seed(0)
    kwargs = {"num_classes": 10}
    if name.startswith(("vit_", "swin", "maxvit", "convnext", "efficientnet")):
        kwargs.update({"dropout": 0.0} if not name.startswith("convnext") else {})
    if name.startswith(("swin", "maxvit", "convnext", "efficientnet")):
        kwargs["stochastic_depth_prob"] = 0.0
    if name in ("googlenet", "inception_v3"):
        kwargs.update({"aux_logits": False, "init_weights": True})
    if name.startswith("vit_"):
        kwargs["image_size"] = 28 if name == "vit_h_14" else 32
    try:
        m = getattr(tvm, name)(**kwargs)
    except TypeError:
        kwargs.pop("dropout", None)
        kwargs.pop("stochastic_depth_prob", None)
        m = getattr(tvm, name)(**kwargs)
    from torchvision.ops import StochasticDepth
    for mod in m.modules():  # no dropout anywhere (the plan draws no random numbers yet)
        if isinstance(mod, (nn.Dropout, StochasticDepth)):
            mod.p = 0.0
    return m.to(dtype).train()


def image_size(name):
    for key, size in IMAGE.items():
        if name.startswith(key):
            return size if not name.startswith("vit") else 28 if name == "vit_h_14" else 32
    return 32


def reference(name, x, y, dtype):
    m = build(name, dtype)
    loss = F.cross_entropy(m(x.to(dtype)), y)
    loss.backward()
    return float(loss), {k: p.grad.double().numpy() for k, p in m.named_parameters()
                         if p.grad is not None}


def relative(g, ref):
    scale = max(float(np.abs(ref).max()) if ref.size else 0.0, FLOOR)
    return float(np.abs(g - ref).max()) / scale if ref.size else 0.0


def run_model(name, tools, tmp, max_params, ranks):
    m = build(name, torch.float32)
    n_params = sum(p.numel() for p in m.parameters())
    if n_params > max_params:
        return "skip", f"{n_params / 1e6:.0f}M parameters (over --max-params)", n_params
    size = image_size(name)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(BATCH, 3, size, size, generator=g)
    y = torch.randint(0, 10, (BATCH,), generator=g)
    base = os.path.join(tmp, name)
    try:
        fsdp_trace.trace(m, {"x": x, "y": y},
                         loss_fn=lambda out, t: F.cross_entropy(out, t)).save(base + ".mlir")
    except fsdp_trace.TraceError as e:
        lines = str(e).strip().splitlines()
        return "tracer", (" ".join(l.strip() for l in lines[1:4]) if len(lines) > 1
                          else lines[0])[:150], n_params
    except Exception as e:
        return "tracer", f"{type(e).__name__}: {str(e).splitlines()[0][:130]}", n_params
    np.savez(base + ".npz", x=x.numpy(), y=y.numpy())
    peaks = []
    for world in sorted({1, ranks}):
        r = bounded.run([tools[0], base + ".mlir", "-o", f"{base}.{world}.plan",
                         "--world-size", str(world)], capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            why = [line for line in r.stderr.splitlines() if "error" in line][:1]
            return "fsdp-opt", (why[0] if why else r.stderr[-150:]).strip()[:150], n_params
        import json
        peaks.append(json.load(open(f"{base}.{world}.plan"))["predicted"]["peak_bytes"])
    r = bounded.run([tools[1], f"{base}.1.plan", "--data", base + ".npz", "--steps", "1",
                     "--quiet", "--dump-grads", base + ".g.safetensors"],
                    capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        return "fsdp-run", r.stderr.strip()[-150:], n_params
    loss64, g64 = reference(name, x, y, torch.float64)
    _, g32 = reference(name, x, y, torch.float32)
    ours = read_safetensors(base + ".g.safetensors")
    worst, worst32, where = 0.0, 0.0, ""
    for key, ref in g64.items():
        if key not in ours:
            continue  # tied or unused
        e = relative(np.asarray(ours[key], np.float64).reshape(ref.shape), ref)
        if e > worst:
            worst, where = e, key
        worst32 = max(worst32, relative(g32[key], ref))
    detail = f"grad {worst:.1e} (torch f32 {worst32:.1e}) at {where}"
    if ranks > 1:
        detail += f"; peak {peaks[0] / 2**20:.0f} -> {peaks[1] / 2**20:.0f} MiB on {ranks} ranks"
        if peaks[1] >= peaks[0]:
            return "no-saving", detail, n_params
        # One global batch split over the ranks: each rank's plan traced
        # with its share (fsdp-run gives rank r rows r·B .. r·B + B - 1),
        # batch norm over the global batch as on one rank.
        share = BATCH // ranks
        fsdp_trace.trace(build(name, torch.float32), {"x": x[:share], "y": y[:share]},
                         loss_fn=lambda out, t: F.cross_entropy(out, t)).save(base + ".split.mlir")
        has_bn = any(isinstance(mod, nn.modules.batchnorm._BatchNorm)
                     for mod in m.modules())
        r = bounded.run([tools[0], base + ".split.mlir", "-o", base + ".split.plan",
                         "--world-size", str(ranks)] + (["--sync-batch-norm"] if has_bn else []),
                        capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            return "fsdp-opt", r.stderr.strip()[-150:], n_params
        r = bounded.run(MPIRUN + ["-np", str(ranks), tools[1], base + ".split.plan", "--data",
                                  base + ".npz", "--steps", "1", "--quiet",
                                  "--dump-grads", base + ".g2.safetensors"],
                        capture_output=True, text=True, timeout=900)
        if r.returncode != 0:
            return f"fsdp-run x{ranks}", r.stderr.strip()[-150:], n_params
        two = read_safetensors(base + ".g2.safetensors")
        spread = max((relative(np.asarray(two[k], np.float64), np.asarray(ours[k], np.float64))
                      for k in ours if k in two), default=0.0)
        detail += f"; {ranks} ranks (batch split) vs 1: {spread:.1e}"
        # The same global computation in another order of sums: within the
        # float32 noise the 1-rank run itself shows against float64.
        if spread > max(TOLERANCE_FACTOR * worst32, 1e-4):
            return f"x{ranks} differs", detail, n_params
    if worst <= max(TOLERANCE_FACTOR * worst32, 1e-5):
        return "ok", detail, n_params
    return "wrong", detail, n_params


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fsdp-opt", required=True)
    ap.add_argument("--fsdp-run", required=True)
    ap.add_argument("--only")
    ap.add_argument("--max-params", type=float, default=30e6)
    ap.add_argument("--ranks", type=int, default=1)
    a = ap.parse_args()
    names = a.only.split(",") if a.only else builders()
    counts = {}
    start = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            t0 = time.time()
            try:
                status, detail, n = run_model(name, (a.fsdp_opt, a.fsdp_run), tmp,
                                              a.max_params, a.ranks)
            except Exception as e:  # a builder that fails in PyTorch itself
                status, detail, n = "error", f"{type(e).__name__}: {str(e)[:120]}", 0
            counts[status] = counts.get(status, 0) + 1
            print(f"{status:11s} {name:22s} {n / 1e6:6.1f}M {time.time() - t0:5.0f}s  {detail}",
                  flush=True)
    print("zoo: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())) +
          f" of {len(names)} ({time.time() - start:.0f} s)")
    return 1 if counts.get("wrong") or counts.get("error") else 0


if __name__ == "__main__":
    sys.exit(main())
