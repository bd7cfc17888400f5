"""Dropout drawn in the plan (issue 37.3), traced or imported from ONNX: fsdp.dropout's mask comes from
Philox-4x32-10 over (seed, step, the element's index in the global batch),
regenerated in backward and in recomputation, never stored.

Checks, each against the property it must have:
- keep rate and scaling: a 40,000-element parameter through dropout(p=0.3)
  with loss Σ dropout(w)²/2: the gradient is w/(1-p)² where kept and 0
  where dropped; the kept fraction lies within 5 standard deviations of
  0.7;
- forward and backward masks agree: that run's loss equals
  Σ (w/(1-p))²/2 over exactly the elements the gradient kept;
- a new mask each step, the same mask on a rerun;
- p = 0 and eval mode trace to no dropout op;
- an MLP with dropout between its layers: the same losses on 1, 2 and 4
  ranks (one global batch), with activation checkpointing on and off, on
  the CPU and the emulated device backend, and after a resume from a
  checkpoint as in an uninterrupted run;
- with --grad-accum=2, each micro-step draws its own mask;
- channel dropout (nn.Dropout2d) kept or dropped whole per sample and
  channel, and alpha dropout's affine on the drawn mask;
- torchvision's mobilenet_v3_small (dropout) and efficientnet_b0 (dropout
  and stochastic depth) with their defaults train alike on 1 and 2 ranks.

    dropout.py --fsdp-opt build/tools/fsdp-opt --fsdp-run build/tools/fsdp-run
"""
import math
import os
import sys
import tempfile
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

from checks import check, failures, losses, run, tools  # noqa: E402
import fsdp_trace  # noqa: E402
from parity import read_safetensors  # noqa: E402

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]
class Masked(nn.Module):
    def __init__(self, n, p):
        super().__init__()
        self.w = nn.Parameter(torch.randn(n, generator=torch.Generator().manual_seed(3)))
        self.d = nn.Dropout(p)

    def forward(self, x):
        return (self.d(self.w * x) ** 2).sum() * 0.5


class Channels(nn.Module):
    """nn.Dropout2d over a [N, C, H, W] parameter: loss Σ y²/2."""

    def __init__(self, p):
        super().__init__()
        self.w = nn.Parameter(torch.randn(8, 16, 5, 5, generator=torch.Generator().manual_seed(4)))
        self.d = nn.Dropout2d(p)

    def forward(self, x):
        return (self.d(self.w * x) ** 2).sum() * 0.5


class Alpha(nn.Module):
    """nn.AlphaDropout over a parameter: loss Σ y (its gradient a·keep)."""

    def __init__(self, n, p):
        super().__init__()
        self.w = nn.Parameter(torch.randn(n, generator=torch.Generator().manual_seed(5)))
        self.d = nn.AlphaDropout(p)

    def forward(self, x):
        return self.d(self.w * x).sum()


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, d)
        self.drop = nn.Dropout(0.25)

    def forward(self, h):
        return h + self.drop(torch.tanh(self.fc(h)))


class Mlp(nn.Module):
    def __init__(self, d=16, n=2):
        super().__init__()
        torch.manual_seed(0)
        self.inp = nn.Linear(8, d)
        self.layers = nn.ModuleList([Block(d) for _ in range(n)])
        self.out = nn.Linear(d, 1)

    def forward(self, x, y):
        h = torch.relu(self.inp(x))
        for layer in self.layers:
            h = layer(h)
        return ((self.out(h).squeeze(-1) - y) ** 2).mean()


def check_keep_rate(opt, fr, t, model_file, m, p, door):
    """One dropout(p) over a parameter w, loss Σ dropout(w)²/2: the kept
    fraction, the kept gradients w/(1-p)², the loss over exactly the kept
    elements (forward and backward drew one mask), a new mask each step
    and the same on a rerun and on the emulated device backend."""
    n = m.w.numel()
    plan = f"{t}/m.{door}.plan"
    run([opt, model_file, "-o", plan, "--optimizer", "sgd", "--lr", "0"])
    run([fr, plan, "--data", f"{t}/m.npz", "--steps", "2", "--quiet",
         "--log", f"{t}/m.jsonl", "--dump-grads", f"{t}/m.g.safetensors"])
    w = m.w.detach().double().numpy()
    g = np.asarray(read_safetensors(f"{t}/m.g.safetensors")["w"], np.float64)
    kept = g != 0
    rate = kept.mean()
    sd = math.sqrt(p * (1 - p) / n)
    check(abs(rate - (1 - p)) < 5 * sd, f"{door}: keep rate {rate:.4f} within 5 sd of {1 - p}")
    scale = 1 / (1 - p)
    check(np.allclose(g[kept], w[kept] * scale * scale, rtol=1e-5),
          f"{door}: kept gradients are w/(1-p)^2 (the forward's scaling, then the backward's)")
    want = 0.5 * float(np.sum((w[kept] * scale) ** 2))
    steps = losses(f"{t}/m.jsonl")
    check(abs(steps[0] - want) <= 1e-4 * want,
          f"{door}: step 1 loss {steps[0]:.6g} = the kept elements' {want:.6g}: forward and "
          f"backward drew one mask")
    # Two masks give losses some 0.8% apart (sd); one mask twice, equal bits.
    check(abs(steps[1] - steps[0]) > 1e-6 * want, f"{door}: step 2 draws another mask")
    run([fr, plan, "--data", f"{t}/m.npz", "--steps", "2", "--quiet", "--log", f"{t}/m2.jsonl"])
    check(losses(f"{t}/m2.jsonl") == steps, f"{door}: a rerun draws the same masks")
    run([fr, plan, "--data", f"{t}/m.npz", "--steps", "2", "--quiet",
         "--backend", "emulated", "--log", f"{t}/me.jsonl"])
    check(np.allclose(losses(f"{t}/me.jsonl"), steps, rtol=1e-5),
          f"{door}: the emulated device backend draws the CPU's masks")


def main():
    opt, fr = tools()
    with tempfile.TemporaryDirectory() as t:
        # Keep rate, scaling, forward/backward agreement: through the
        # tracer, and through ONNX (torch.onnx.export in training mode
        # writes Dropout with training_mode = true).
        n, p = 40000, 0.3
        m = Masked(n, p)
        x = torch.ones(())
        np.savez(f"{t}/m.npz", x=x.numpy())
        fsdp_trace.trace(m, {"x": x}).save(f"{t}/m.mlir")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(m.train(), (x,), f"{t}/m.onnx", input_names=["x"],
                              output_names=["loss"], opset_version=17,
                              do_constant_folding=False,
                              training=torch.onnx.TrainingMode.TRAINING)
        for door in ("mlir", "onnx"):
            check_keep_rate(opt, fr, t, f"{t}/m.{door}", m, p, door)

        # Gradient accumulation: each micro-step draws its own mask, so the
        # averaged gradient is w/(1-p)^2 times 0, 1/2 or 1: kept by one
        # micro-step of two in 2p(1-p) of the elements (one shared mask
        # would give no halves).
        run([opt, f"{t}/m.mlir", "-o", f"{t}/acc.plan", "--optimizer", "sgd", "--lr", "0",
             "--grad-accum", "2"])
        run([fr, f"{t}/acc.plan", "--data", f"{t}/m.npz", "--steps", "1", "--quiet",
             "--dump-grads", f"{t}/acc.g.safetensors"])
        w = m.w.detach().double().numpy()
        g = np.asarray(read_safetensors(f"{t}/acc.g.safetensors")["w"], np.float64)
        share = g / (w / (1 - p) ** 2)
        half = np.isclose(share, 0.5, rtol=1e-5).mean()
        whole = np.isclose(share, 1.0, rtol=1e-5).mean()
        none = (g == 0).mean()
        sd = math.sqrt(2 * p * (1 - p) * (1 - 2 * p * (1 - p)) / n)
        check(abs(half + whole + none - 1) < 1e-9 and abs(half - 2 * p * (1 - p)) < 5 * sd,
              f"--grad-accum=2: kept by one micro-step of two in {half:.4f} of the elements "
              f"(2p(1-p) = {2 * p * (1 - p):.4f}), by both in {whole:.4f}: each micro-step "
              f"draws its own mask")

        # Channel dropout: one draw per sample and channel.
        p = 0.25
        ch = Channels(p)
        fsdp_trace.trace(ch, {"x": x}).save(f"{t}/ch.mlir")
        run([opt, f"{t}/ch.mlir", "-o", f"{t}/ch.plan", "--optimizer", "sgd", "--lr", "0"])
        run([fr, f"{t}/ch.plan", "--data", f"{t}/m.npz", "--steps", "1", "--quiet",
             "--dump-grads", f"{t}/ch.g.safetensors"])
        w = ch.w.detach().double().numpy()
        g = np.asarray(read_safetensors(f"{t}/ch.g.safetensors")["w"], np.float64).reshape(w.shape)
        kept = (g != 0).reshape(8 * 16, -1)
        whole = np.all(kept.all(1) | (~kept).all(1))
        check(whole, "dropout2d: each (sample, channel) kept or dropped whole")
        rate = kept.all(1).mean()
        check(abs(rate - (1 - p)) < 5 * math.sqrt(p * (1 - p) / 128),
              f"dropout2d: kept channels {rate:.3f} within 5 sd of {1 - p}")
        k4 = kept.all(1).reshape(8, 16, 1, 1)
        check(np.allclose(g, np.where(k4, w / (1 - p) ** 2, 0.0), rtol=1e-5, atol=1e-7),
              "dropout2d: kept gradients are w/(1-p)^2")

        # Alpha dropout: y = a·(x·k + α'(1 - k)) + b keeps SELU's statistics.
        n2, p = 20000, 0.2
        al = Alpha(n2, p)
        fsdp_trace.trace(al, {"x": x}).save(f"{t}/al.mlir")
        run([opt, f"{t}/al.mlir", "-o", f"{t}/al.plan", "--optimizer", "sgd", "--lr", "0"])
        run([fr, f"{t}/al.plan", "--data", f"{t}/m.npz", "--steps", "1", "--quiet",
             "--log", f"{t}/al.jsonl", "--dump-grads", f"{t}/al.g.safetensors"])
        alpha = 1.7580993408473766
        a = 1.0 / math.sqrt((alpha * alpha * p + 1) * (1 - p))
        g = np.asarray(read_safetensors(f"{t}/al.g.safetensors")["w"], np.float64)
        k = np.isclose(g, a, rtol=1e-5)
        check(np.all(k | (g == 0)), f"alpha dropout: gradients are a = {a:.6f} or 0")
        check(abs(k.mean() - (1 - p)) < 5 * math.sqrt(p * (1 - p) / n2),
              f"alpha dropout: keep rate {k.mean():.4f} within 5 sd of {1 - p}")
        w = al.w.detach().double().numpy()
        want = float(np.sum(w * k * a + (k - 1.0) * alpha * a + alpha * a * p))
        got = losses(f"{t}/al.jsonl")[0]
        check(abs(got - want) <= 1e-4 * max(abs(want), 1.0),
              f"alpha dropout: loss {got:.6g} = PyTorch's formula on the drawn mask {want:.6g}")

        # p = 0 and eval mode: no dropout op.
        for label, module, train in (("p=0", Masked(8, 0.0), True),
                                     ("eval", Masked(8, 0.5), False)):
            text = fsdp_trace.trace(module, {"x": x}, train=train).text()
            check("fsdp.dropout" not in text, f"{label}: no dropout op")

        # An MLP: world sizes, checkpointing, resume.
        # One global batch of 8 rows: each rank's plan is traced with its
        # share (fsdp-run gives rank r rows r·B .. r·B + B - 1).
        g = torch.Generator().manual_seed(5)
        xs, ys = torch.randn(8, 8, generator=g), torch.randn(8, generator=g)
        np.savez(f"{t}/mlp.npz", x=xs.numpy(), y=ys.numpy())
        for ranks in (1, 2, 4):
            b = 8 // ranks
            fsdp_trace.trace(Mlp(), {"x": xs[:b], "y": ys[:b]}).save(f"{t}/mlp{ranks}.mlir")
        runs = {}
        for name, ranks, extra in (("1 rank", 1, []), ("2 ranks", 2, []), ("4 ranks", 4, []),
                                   ("1 rank, AC", 1, ["--activation-checkpointing=units"]),
                                   ("2 ranks, AC", 2, ["--activation-checkpointing=units"])):
            plan = f"{t}/mlp.{ranks}.{len(extra)}.plan"
            run([opt, f"{t}/mlp{ranks}.mlir", "-o", plan, "--world-size", str(ranks),
                 "--wrap=regex:layers\\.[0-9]+"] + extra)
            log = f"{t}/mlp.{ranks}.{len(extra)}.jsonl"
            launch = MPIRUN + ["-np", str(ranks)] if ranks > 1 else []
            run(launch + [fr, plan, "--data", f"{t}/mlp.npz", "--steps", "4", "--quiet",
                          "--log", log])
            runs[name] = losses(log)
        base = runs["1 rank"]
        check(len(set(base)) == len(base), "the MLP's losses change from step to step")
        for name, got in runs.items():
            if name != "1 rank":
                check(np.allclose(got, base, rtol=1e-5, atol=1e-7),
                      f"{name}: the 1-rank losses {['%.6g' % v for v in got]}")
        plan = f"{t}/mlp.1.0.plan"
        run([fr, plan, "--data", f"{t}/mlp.npz", "--steps", "2", "--quiet",
             "--checkpoint-dir", f"{t}/ck", "--checkpoint-every", "2"])
        run([fr, plan, "--data", f"{t}/mlp.npz", "--steps", "4", "--quiet",
             "--resume", f"{t}/ck", "--log", f"{t}/resumed.jsonl"])
        resumed = losses(f"{t}/resumed.jsonl")
        check(np.allclose(resumed, base[-len(resumed):], rtol=1e-6),
              f"a resumed run draws the uninterrupted run's masks ({len(resumed)} steps)")
        # Zoo models with their default dropout, one global batch of 4 on 1
        # and 2 ranks, three steps (a new mask each): MobileNet v3's
        # classifier (p = 0.2), and EfficientNet B0's classifier dropout and
        # its residual blocks' stochastic depth.
        import torch.nn.functional as F
        import torchvision
        g = torch.Generator().manual_seed(7)
        xi, yi = torch.randn(4, 3, 32, 32, generator=g), torch.randint(0, 10, (4,), generator=g)
        np.savez(f"{t}/mb.npz", x=xi.numpy(), y=yi.numpy())
        # (EfficientNet at 32x32 is ill-conditioned, docs/OpCoverage.md: its
        # trajectories part at rounding level within steps, so it runs at
        # lr 0, where each step's loss is the masks' alone.)
        for name, drops, train in (("mobilenet_v3_small", 1, []),
                                   ("efficientnet_b0", 1 + 9, ["--optimizer", "sgd", "--lr", "0"])):
            runs = []
            for ranks in (1, 2):
                torch.manual_seed(0)
                net = getattr(torchvision.models, name)(num_classes=10)
                b = 4 // ranks
                traced = fsdp_trace.trace(net, {"x": xi[:b], "y": yi[:b]},
                                          loss_fn=lambda out, y: F.cross_entropy(out, y))
                traced.save(f"{t}/{name}{ranks}.mlir")
                if ranks == 1:
                    found = traced.text().count('"fsdp.dropout"')
                    check(found == drops, f"{name}: {found} fsdp.dropout ops (its dropout "
                                          f"and stochastic depth: {drops})")
                # (SyncBatchNorm: batch statistics over the global batch, as
                # on one rank.)
                run([opt, f"{t}/{name}{ranks}.mlir", "-o", f"{t}/{name}{ranks}.plan",
                     "--world-size", str(ranks)] + train +
                    (["--sync-batch-norm"] if ranks > 1 else []))
                launch = MPIRUN + ["-np", str(ranks)] if ranks > 1 else []
                run(launch + [fr, f"{t}/{name}{ranks}.plan", "--data", f"{t}/mb.npz",
                              "--steps", "3", "--quiet", "--log", f"{t}/{name}{ranks}.jsonl"])
                runs.append(losses(f"{t}/{name}{ranks}.jsonl"))
            check(all(math.isfinite(v) for v in runs[0]) and len(set(runs[0])) == 3 and
                  np.allclose(runs[0], runs[1], rtol=1e-4),
                  f"{name} with its default dropout: 1 and 2 ranks train alike "
                  f"({['%.5g' % v for v in runs[0]]} and {['%.5g' % v for v in runs[1]]})")
    print(f"dropout: {len(failures)} failing" if failures else "dropout: all checks hold")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
