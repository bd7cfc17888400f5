"""The torchvision and torchaudio zoos through the tracer (issue 37.2).

Each builder of torchvision.models with num_classes=10, in training mode,
dropout and stochastic depth set to 0, on a batch of 4 small images (the
smallest each accepts), and each trainable torchaudio model at a small
width (zoo_cases.py): traced with its loss (cross-entropy; for audio the
mean squared error of the first output against a random target), compiled,
run one step on one rank (--world-size 1) and, with --ranks 2, on two
under mpirun with the batch split between them (SyncBatchNorm, so the
statistics are the global batch's); the gradients judged against PyTorch
float64 relative to PyTorch float32's own error, as the OpInfo suite does
(opinfo.py), the 2-rank gradients against the 1-rank ones, and the
2-rank plan's predicted peak against the 1-rank one at the same local
batch.

    zoo.py --fsdp-opt build/tools/fsdp-opt --fsdp-run build/tools/fsdp-run
           [--only resnet18,...] [--max-params 30e6] [--ranks 2]
           [--source torchvision|torchaudio|all]

Prints one line a model and the table of what trains, what is refused and
why. Models above --max-params are listed as skipped (their step takes
minutes on two cores).
"""
import argparse
import contextlib
import json
import os
import re
import sys
import tempfile
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

import bounded  # noqa: E402
import fsdp_trace  # noqa: E402
from parity import read_safetensors  # noqa: E402
from zoo_cases import all_cases, first  # noqa: E402

TOLERANCE_FACTOR, FLOOR = 10.0, 1e-4
KINK_NOISE = 1e-3
ILL_CONDITIONED = 1.0
BATCH = 4  # 2 a rank on two ranks
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]


def cast(tensors, dtype):
    return {k: v.to(dtype) if v.is_floating_point() else v for k, v in tensors.items()}


def draw(case):
    """The case's batch: forward's inputs and the loss's target."""
    g = torch.Generator().manual_seed(1)
    inputs = case.inputs(g, BATCH)
    with torch.no_grad():
        out = case.build(torch.float32, BATCH)(**inputs)
    return inputs, case.target(g, out)


def reference(case, inputs, target, dtype, jitter=None, batch=BATCH):
    """PyTorch's step at `dtype`: the loss and the gradients. With `jitter`
    (a seed), every float parameter and input first moves by one rounding
    of float32 (x·(1 ± 2^-24), the sign drawn per element): a draw of the
    float32 noise the step's result carries."""
    m = case.build(dtype, batch)
    inputs = cast(inputs, dtype)
    if jitter is not None:
        g = torch.Generator().manual_seed(jitter)

        def nudge(t):
            sign = torch.randint(0, 2, t.shape, generator=g).to(t.dtype) * 2 - 1
            return t * (1 + sign * 2.0 ** -24)
        with torch.no_grad():
            for p in m.parameters():
                p.copy_(nudge(p))
        inputs = {k: nudge(v) if v.is_floating_point() else v for k, v in inputs.items()}
    with (case.reference_context or contextlib.nullcontext)():
        loss = case.loss(m(**inputs), target.to(dtype) if target.is_floating_point()
                         else target)
        loss.backward()
    return float(loss), {k: p.grad.double().numpy() for k, p in m.named_parameters()
                         if p.grad is not None}


FRONTEND = "auto"  # --frontend: how fsdp_trace captures (export, make_fx)


def trace(case, inputs, target, batch, path):
    share = {k: v[:batch] for k, v in inputs.items()}
    share["target"] = target[:batch]
    traced = fsdp_trace.trace(case.build(torch.float32, batch), share, loss_fn=case.loss,
                              train=case.train, frontend=FRONTEND)
    traced.save(path)
    return traced


class WithLoss(nn.Module):
    """A model and its loss as one module, the form torch.onnx.export
    writes a training step's forward in (the ONNX front door's contract:
    a graph whose output is the loss)."""

    def __init__(self, model, loss, names):
        super().__init__()
        self.model, self.loss, self.names = model, loss, names

    def forward(self, *args):
        *given, target = args
        return self.loss(self.model(**dict(zip(self.names, given))), target)


def export(case, inputs, target, path):
    """The ONNX column: the model with its loss exported in training mode
    (batch norm on the batch's statistics), opset 17, nothing folded."""
    model = WithLoss(case.build(torch.float32, BATCH), case.loss, list(inputs))
    # Always in training mode, even where the tracer takes eval mode
    # (wav2vec2's layer drop: its draw is traced as one constant branch,
    # here always taken): in eval mode torch 1.13's exporter merges
    # initializers of equal value (every LayerNorm's ones and zeros become
    # one tied parameter), which trains another model.
    model.train()
    with warnings.catch_warnings():  # the exporter's notes on in-place ops, one a layer
        warnings.simplefilter("ignore")
        torch.onnx.export(model, tuple(inputs.values()) + (target,), path,
                          input_names=list(inputs) + ["target"], output_names=["loss"],
                          opset_version=17, do_constant_folding=False,
                          training=torch.onnx.TrainingMode.TRAINING)


def allowed(noise):
    """How far from float64 ours may land given PyTorch float32's `noise`:
    10x a rounding-sized noise (sums blocked otherwise round 10x apart);
    2x a noise from kinks (past KINK_NOISE: one flipped element moves a
    batch-normed gradient by a tenth of its size, and ours is one more
    draw of which elements flip)."""
    return max(TOLERANCE_FACTOR * noise if noise < KINK_NOISE else 2 * noise, 1e-5)


def relative(g, ref):
    """The largest error over the largest reference element (a NaN or an
    infinity anywhere: inf)."""
    if not ref.size:
        return 0.0
    scale = max(float(np.abs(ref).max()), FLOOR)
    e = float(np.abs(g - ref).max()) / scale
    return e if np.isfinite(e) else np.inf


def _wrap_differs(module, remarks):
    """'' when the default policy made a unit of exactly the layer classes
    transformers names as `_no_split_modules` (what Accelerate's
    TRANSFORMER_BASED_WRAP wraps), among those the model holds; else why
    not. Where transformers names none that the model holds (DistilBERT),
    Accelerate has nothing to wrap by (it asks for the class) and the
    default policy's choice stands."""
    hf = getattr(module, "model", module)
    present = {type(x).__name__ for x in hf.modules()}
    want = set(getattr(hf, "_no_split_modules", None) or []) & present
    if not want:
        return ""
    found = re.search(r"transformer policy: a unit per module of class ([\w, ]+)", remarks)
    got = set(c.strip() for c in found.group(1).split(",")) if found else set()
    if got != want:
        return f"units by class {sorted(got)}, transformers' _no_split_modules {sorted(want)}"
    return ""


def _context_keeps_forward(case, inputs):
    """Where PyTorch's reference steps run under the case's context, the
    model's forward under it must be PyTorch's own as the model is written
    (run without grad, where PyTorch runs it): otherwise the reference is
    another model. Returns why not, or None. In float32: torch.compile's
    FlexAttention kernels take no float64."""
    m = case.build(torch.float32, BATCH)
    with torch.no_grad():
        plain = first(m(**inputs))
        with case.reference_context():
            under = first(m(**inputs))
    e = relative(under.numpy(), plain.numpy())
    return None if e <= 1e-5 else f"forward under the reference context differs by {e:.1e}"


def run_model(case, tools, tmp, max_params, ranks, onnx=False):
    if case.refused:
        return "refused", case.refused, 0
    m = case.build(torch.float32, BATCH)
    n_params = sum(p.numel() for p in m.parameters())
    if n_params > max_params:
        return "skip", f"{n_params / 1e6:.0f}M parameters (over --max-params)", n_params
    inputs, target = draw(case)
    if case.reference_context is not None:
        why = _context_keeps_forward(case, inputs)
        if why:
            return "wrong", why, n_params
    base = os.path.join(tmp, case.name)
    model_file = base + (".onnx" if onnx else ".mlir")
    try:
        if onnx:
            export(case, inputs, target, model_file)
        else:
            trace(case, inputs, target, BATCH, model_file)
    except fsdp_trace.TraceError as e:
        lines = str(e).strip().splitlines()
        return "tracer", (" ".join(l.strip() for l in lines[1:4]) if len(lines) > 1
                          else lines[0])[:240], n_params
    except Exception as e:
        return ("exporter" if onnx else "tracer"), \
            f"{type(e).__name__}: {str(e).strip().splitlines()[0][:130]}", n_params
    np.savez(base + ".npz", target=target.numpy(), **{k: v.numpy() for k, v in inputs.items()})
    peaks = []
    for world in sorted({1, ranks}):
        r = bounded.run([tools[0], model_file, "-o", f"{base}.{world}.plan",
                         "--world-size", str(world)], capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            why = [line for line in r.stderr.splitlines() if "error" in line][:1]
            kinds = sorted(set(re.findall(r"' \((\w+)\)", why[0]))) if why else []
            if "unsupported op" in r.stderr and kinds:  # the op types, not the nodes
                return "fsdp-opt", "unsupported: " + ", ".join(kinds), n_params
            why = (why[0] if why else r.stderr[-150:]).strip()
            return "fsdp-opt", why[why.find("error:"):][:150], n_params
        plan = json.load(open(f"{base}.{world}.plan"))
        peaks.append(plan["predicted"]["peak_bytes"])
        fused = sum(1 for i in plan["program"] if i["op"] == "attention")
        if world == 1 and case.fused_attention not in (None, fused):
            return "unfused", (f"{fused} attention products fused, "
                               f"{case.fused_attention} expected"), n_params
        # A model that checkpoints itself is planned recomputing its units.
        with open(model_file) as f:
            checkpointed = not onnx and "fsdp.checkpointed_calls" in f.readline()
        if world == 1 and checkpointed and not plan["predicted"].get("recompute_seconds"):
            return "fsdp-opt", "the model checkpoints itself and the plan recomputes nothing", \
                n_params
        if world == 1 and case.source == "transformers" and not onnx:
            why = _wrap_differs(m, r.stderr)
            if why:
                return "wrap-differs", why, n_params
    r = bounded.run([tools[1], f"{base}.1.plan", "--data", base + ".npz", "--steps", "1",
                     "--quiet", "--dump-grads", base + ".g.safetensors"],
                    capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        return "fsdp-run", r.stderr.strip()[-150:], n_params
    loss64, g64 = reference(case, inputs, target, torch.float64)
    # PyTorch float32's distance from float64, over three draws of the
    # rounding (as it is, and jittered twice): near a ReLU kink the draws
    # land on either side, and the spread they show is the noise ours is
    # judged against.
    g32s = [reference(case, inputs, target, torch.float32, jitter)[1]
            for jitter in (None, 1, 2)]
    again = reference(case, inputs, target, torch.float32)[1]
    # PyTorch's float32 step run twice must give the same bits; where it
    # does not (1.13's CPU backward in wav2vec2's feature extractor: NaN
    # or 1e24 one run, 0.8 the next) it is no yardstick, and ours is
    # judged against float64 alone.
    unusable = any(not np.array_equal(again[k], g32s[0][k], equal_nan=True) for k in again)
    ours = read_safetensors(base + ".g.safetensors")
    if onnx:  # initializers are named by WithLoss's attribute
        ours = {k[len("model."):]: v for k, v in ours.items() if k.startswith("model.")}
    worst, worst32, where = 0.0, 0.0, ""
    for key, ref in g64.items():
        if key not in ours:  # a parameter PyTorch trains that the plan does not
            return "wrong", f"no gradient for {key}", n_params
        e = relative(np.asarray(ours[key], np.float64).reshape(ref.shape), ref)
        if e > worst:
            worst, where = e, key
        worst32 = max([worst32] + [relative(g32[key], ref) for g32 in g32s])
    detail = f"grad {worst:.1e} (torch f32 {worst32:.1e}) at {where}"
    if unusable:
        detail += "; torch f32 differs run to run, judged against float64 alone"
        worst32 = FLOOR / TOLERANCE_FACTOR
    if ranks > 1 and not onnx:
        detail += f"; peak {peaks[0] / 2**20:.0f} -> {peaks[1] / 2**20:.0f} MiB on {ranks} ranks"
        if peaks[1] >= peaks[0]:
            return "no-saving", detail, n_params
        # One global batch split over the ranks: each rank's plan traced
        # with its share (fsdp-run gives rank r rows r·B .. r·B + B - 1),
        # batch norm over the global batch as on one rank.
        trace(case, inputs, target, BATCH // ranks, base + ".split.mlir")
        has_bn = any(isinstance(mod, nn.modules.batchnorm._BatchNorm)
                     for mod in m.modules())

        def split_step(flags, name):
            """The split plan's step on `ranks` ranks: its gradients, or
            the failing tool's status."""
            r = bounded.run([tools[0], base + ".split.mlir", "-o", base + ".split.plan",
                             "--world-size", str(ranks)] + flags
                            + (["--sync-batch-norm"] if has_bn else []),
                            capture_output=True, text=True, timeout=600)
            if r.returncode != 0:
                return "fsdp-opt", r.stderr.strip()[-150:]
            r = bounded.run(MPIRUN + ["-np", str(ranks), tools[1], base + ".split.plan",
                                      "--data", base + ".npz", "--steps", "1", "--quiet",
                                      "--log", f"{base}.{name}.jsonl",
                                      "--dump-grads", f"{base}.{name}.safetensors"],
                            capture_output=True, text=True, timeout=900)
            if r.returncode != 0:
                return f"fsdp-run x{ranks}", r.stderr.strip()[-150:]
            grads = read_safetensors(f"{base}.{name}.safetensors")
            grads["(loss)"] = json.loads(open(f"{base}.{name}.jsonl").readline())["loss"]
            return None, grads

        failed, two = split_step([], "g2")
        if failed:
            return failed, two, n_params
        against = ours
        if case.rank_means:
            # Each rank's loss is the mean over its own counted targets,
            # and the ranks' gradients are averaged (PyTorch DDP's and
            # FSDP's convention): judged against PyTorch's steps on each
            # rank's rows, averaged, not against one rank's whole batch.
            share = BATCH // ranks
            steps = [reference(case, {k: v[r * share:(r + 1) * share] for k, v in inputs.items()},
                               target[r * share:(r + 1) * share], torch.float64,
                               batch=share)[1] for r in range(ranks)]
            against = {k: sum(s[k] for s in steps) / ranks for k in steps[0]}
            def from_whole(grads):
                return max(relative(np.asarray(grads[k], np.float64).reshape(v.shape), v)
                           for k, v in g64.items() if k in grads)
            detail += (f"; {ranks} ranks vs PyTorch's whole batch {from_whole(two):.1e} "
                       f"(means differ)")
            # --loss-average=tokens: the mean over every rank's counted
            # targets, PyTorch's step on the whole batch.
            failed, tokens = split_step(["--loss-average=tokens"], "g2t")
            if failed:
                return failed + " (tokens)", tokens, n_params
            by_tokens = from_whole(tokens)
            # The logged loss too: the whole batch's, where the ranks'
            # means average to another number.
            def loss_from_whole(run):
                return abs(run["(loss)"] - loss64) / abs(loss64)
            loss_off = loss_from_whole(tokens)
            detail += (f"; --loss-average=tokens vs the whole batch {by_tokens:.1e}, "
                       f"loss {loss_off:.1e} (ranks' means: {loss_from_whole(two):.1e})")
            if by_tokens > max(allowed(worst32), 1e-4) or loss_off > 1e-5:
                return f"x{ranks} tokens differs", detail, n_params
        ill = worst32 >= ILL_CONDITIONED and not case.rank_means
        if ill:
            # Past ILL_CONDITIONED the 1-rank run is one draw of which
            # elements flip at kinks, and the 2-rank run another: two
            # draws each within 2x the noise of float64 may lie 4x it
            # apart (regnet_x_400mf on an AVX2 EPYC: 5.9 apart, each 2.2
            # from float64), so the 2-rank run is judged as the 1-rank
            # run is, against float64.
            against = g64
        spread = max((relative(np.asarray(two[k], np.float64).reshape(np.shape(against[k])),
                               np.asarray(against[k], np.float64))
                      for k in against if k in two), default=0.0)
        detail += (f"; {ranks} ranks vs PyTorch's per-rank steps averaged: {spread:.1e}"
                   if case.rank_means else
                   f"; {ranks} ranks (batch split) vs float64: {spread:.1e}" if ill else
                   f"; {ranks} ranks (batch split) vs 1: {spread:.1e}")
        # The same global computation in another order of sums: within the
        # float32 noise the 1-rank run itself shows against float64.
        if spread > max(allowed(worst32), 1e-4):
            return f"x{ranks} differs", detail, n_params
    if case.note and not onnx:
        detail += f" ({case.note})"
    if worst <= allowed(worst32):
        # Past ILL_CONDITIONED PyTorch's own float32 step is further from
        # float64 than the gradient is large (batch norm over four images of
        # a 1x1 map, many elements at kinks): it trains and lands within the
        # spread, which says little; counted apart from "ok".
        return ("ok" if worst32 < ILL_CONDITIONED else "ill-cond"), detail, n_params
    return "wrong", detail, n_params


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fsdp-opt", required=True)
    ap.add_argument("--fsdp-run", required=True)
    ap.add_argument("--only")
    ap.add_argument("--max-params", type=float, default=30e6)
    ap.add_argument("--ranks", type=int, default=1)
    ap.add_argument("--source", choices=["torchvision", "torchaudio", "torch.nn",
                                         "transformers", "all"],
                    default="all")
    ap.add_argument("--strict", action="store_true",
                    help="fail unless every model trains (ok, ill-cond), is refused "
                         "by design, skipped, or named by --known")
    ap.add_argument("--known", default="",
                    help="models known not to train yet (with --strict)")
    ap.add_argument("--min-trained", type=int, default=0,
                    help="fail unless at least this many models train (ok, ill-cond): "
                         "a suite whose models all skip, or whose source does not "
                         "import, has checked nothing")
    ap.add_argument("--onnx", action="store_true",
                    help="the ONNX column: torch.onnx.export's file, one rank")
    ap.add_argument("--frontend", choices=fsdp_trace.capture_frontends(), default="auto",
                    help="how the tracer captures: torch.export (PyTorch 2.x), make_fx, "
                         "or auto (export where it can)")
    a = ap.parse_args()
    global FRONTEND
    FRONTEND = a.frontend
    print(f"PyTorch {torch.__version__}, frontend {a.frontend}", flush=True)
    cases = {c.name: c for c in all_cases() if a.source in ("all", c.source)}
    names = a.only.split(",") if a.only else list(cases)
    unknown = [n for n in names if n not in cases]
    if unknown:
        ap.error(f"--only: no model {', '.join(unknown)} in {a.source}")
    counts, statuses = {}, {}
    start = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            t0 = time.time()
            try:
                status, detail, n = run_model(cases[name], (a.fsdp_opt, a.fsdp_run), tmp,
                                              a.max_params, a.ranks, a.onnx)
            except Exception as e:  # a builder that fails in PyTorch itself
                status, detail, n = "error", f"{type(e).__name__}: {str(e)[:120]}", 0
            counts[status] = counts.get(status, 0) + 1
            statuses[name] = status
            print(f"{status:11s} {name:22s} {n / 1e6:6.1f}M {time.time() - t0:5.0f}s  {detail}",
                  flush=True)
    print("zoo: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())) +
          f" of {len(names)} ({time.time() - start:.0f} s)")
    if counts.get("wrong") or counts.get("error"):
        return 1
    trained = counts.get("ok", 0) + counts.get("ill-cond", 0)
    if trained < a.min_trained:
        print(f"zoo: FAILED: {trained} models trained, fewer than the {a.min_trained} "
              f"--min-trained asks" + ("" if cases else f" (no {a.source} model: does "
                                       f"{a.source} import in this Python?)"))
        return 1
    if a.strict:
        known = set(filter(None, a.known.split(",")))
        bad = [n for n, st in statuses.items()
               if st not in ("ok", "ill-cond", "skip", "refused") and n not in known]
        if bad:
            print("zoo: expected to train: " + ", ".join(bad))
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
