"""Random draws made in the plan (fsdp.uniform; python/fsdp_trace/decompose/
draws.py): torch.rand, randn, uniform_, normal_, exponential_, bernoulli,
randint, torch.normal and rrelu's slopes, as a VAE's reparameterisation, a diffusion
model's noise, Gumbel-softmax and a router's jitter use them. No generator
reproduces PyTorch's draws, so each is judged by what it must have:

- its distribution: a parameter w of 40,000 elements and the loss Σ w·d,
  d = the draw shaped as w, so the gradient the plan writes is d itself.
  The continuous draws' empirical CDF within the Kolmogorov-Smirnov bound
  of the named distribution (α = 1e-6, from the draws of a fixed seed: the
  check is deterministic), and their mean and variance within 6 standard
  errors; bernoulli's rate and each of randint's values' frequency within
  6 standard deviations; every value in its support. rand, randn,
  torch.normal and bernoulli again through ONNX (torch.onnx.export's
  RandomUniform(Like), RandomNormal(Like); PyTorch 1.13 only);
- torch.normal's mean and std get no gradient (as in PyTorch);
- rrelu: gradient 1 where the input is positive, the drawn slope
  elsewhere, and the loss Σ w·grad(w) (forward and backward drew one slope);
- a VAE's z = μ + exp(logvar/2)·ε, loss Σ z²/2 at μ = 0, logvar = 0: the
  gradients are ε and ε²/2, so grad(logvar) = grad(μ)²/2 element by
  element shows the forward and the backward saw the same ε;
- new draws at the next step, the same on a rerun and on the emulated
  device backend;
- an MLP with Gaussian noise on its activations, Gumbel noise on its
  logits and a Bernoulli mask: the same losses on 1 and 2 ranks (one
  global batch: a sample's draws do not depend on the world size), and
  with activation checkpointing (recomputation draws the same values);
- transformers' PhiMoE, whose router samples its experts in training,
  and ViTMAE pretraining, which masks a random 75% of the patches: the
  same losses on 1 and 2 ranks, at lr 0 a loss that still moves from step
  to step, and MAE's first loss within the range of PyTorch's over 400
  masks (where transformers is installed: draws-torch2);
- in bf16 (--compute-dtype=bf16) every uniform draw lies in [0, 1) and
  is a multiple of 2^-8 (a draw rounded up to 1 would make ln(1 - u)
  infinite), and the exponential draws are finite.

    draws.py --fsdp-opt build/tools/fsdp-opt --fsdp-run build/tools/fsdp-run
"""
import importlib.util
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
import torch.nn.functional as F  # noqa: E402

from checks import check, failures, losses, run, tools  # noqa: E402
import fsdp_trace  # noqa: E402
from parity import read_safetensors  # noqa: E402

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]
N = 40000
# Each draw shaped (N,), from an input x of ones (N,) where it takes one.
DRAWS = {
    "rand": lambda x: torch.rand_like(x),
    "rand(size)": lambda x: torch.rand(N),
    "uniform_(-1, 2)": lambda x: torch.empty_like(x).uniform_(-1.0, 2.0),
    "randn": lambda x: torch.randn_like(x),
    "normal_(1, 3)": lambda x: torch.empty_like(x).normal_(1.0, 3.0),
    "normal(0, 2, size)": lambda x: torch.normal(0.0, 2.0, (N,)),
    "exponential_(2)": lambda x: torch.empty_like(x).exponential_(2.0),
    "bernoulli(0.3)": lambda x: torch.bernoulli(x, 0.3),
    "bernoulli(probs)": lambda x: torch.bernoulli(x * 0.8),
    "randint(3, 10)": lambda x: torch.randint(3, 10, (N,)).to(x.dtype),
    "randint_like(x, 5)": lambda x: torch.randint_like(x, 5),
    # rrelu of -1: minus its slope, drawn in [0.1, 0.3) per element.
    "rrelu slopes": lambda x: -F.rrelu(-x, 0.1, 0.3, training=True),
}


def cdf(name, v):
    """The named continuous distribution's CDF at v (None: discrete)."""
    erf = np.vectorize(math.erf)
    if name in ("rand", "rand(size)"):
        return np.clip(v, 0, 1)
    if name == "uniform_(-1, 2)":
        return np.clip((v + 1) / 3, 0, 1)
    if name == "randn":
        return 0.5 * (1 + erf(v / math.sqrt(2)))
    if name == "normal_(1, 3)":
        return 0.5 * (1 + erf((v - 1) / (3 * math.sqrt(2))))
    if name == "normal(0, 2, size)":
        return 0.5 * (1 + erf(v / (2 * math.sqrt(2))))
    if name == "exponential_(2)":
        return 1 - np.exp(-2 * np.maximum(v, 0))
    if name == "rrelu slopes":
        return np.clip((v - 0.1) / 0.2, 0, 1)
    return None


MOMENTS = {"rand": (0.5, 1 / 12), "rand(size)": (0.5, 1 / 12), "uniform_(-1, 2)": (0.5, 0.75),
           "randn": (0.0, 1.0), "normal_(1, 3)": (1.0, 9.0), "normal(0, 2, size)": (0.0, 4.0),
           "exponential_(2)": (0.5, 0.25), "rrelu slopes": (0.2, 0.04 / 12)}


class Weighted(nn.Module):
    """loss Σ w·draw: the gradient of w is the draw."""

    def __init__(self, draw):
        super().__init__()
        self.w = nn.Parameter(torch.ones(N))
        self.draw = draw

    def forward(self, x):
        return (self.w * self.draw(x)).sum()


class Picked(nn.Module):
    """loss Σ w[randint(0, 1000, (N,))]: the gradient of w counts how often
    each of 1000 rows was drawn (a diffusion model's timesteps)."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(1000))

    def forward(self, x):
        return (self.w[torch.randint(0, 1000, (N,))] * x).sum()


def grads(opt, fr, t, mlir, name, extra=(), steps=1, backend=None):
    plan = f"{t}/{name}.plan"
    run([opt, mlir, "-o", plan, "--optimizer", "sgd", "--lr", "0", *extra])
    argv = [fr, plan, "--data", f"{t}/ones.npz", "--steps", str(steps), "--quiet",
            "--log", f"{t}/{name}.jsonl"]
    if backend:  # (gradients are dumped by the CPU backend only)
        run(argv + ["--backend", backend])
        return None, losses(f"{t}/{name}.jsonl")
    run(argv + ["--dump-grads", f"{t}/{name}.g.safetensors"])
    return (read_safetensors(f"{t}/{name}.g.safetensors"), losses(f"{t}/{name}.jsonl"))


# The draws torch.onnx.export writes as ONNX's random ops (PyTorch 1.13's
# exporter: RandomUniformLike, RandomUniform, RandomNormalLike,
# RandomNormal; bernoulli as RandomUniformLike < p).
ONNX_DRAWS = ("rand", "rand(size)", "randn", "normal(0, 2, size)", "bernoulli(probs)")


EXPORTER = torch.__version__ < "2"  # (the suites that export run on 1.13)


def exported_draws(opt, fr, t, x, draw, name):
    """The draws of Weighted(draw) exported by torch.onnx.export in
    training mode, imported and stepped once (the gradient of w)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Weighted(draw).train(), (x,), f"{t}/{name}.onnx",
                          input_names=["x"], output_names=["loss"], opset_version=17,
                          do_constant_folding=False,
                          training=torch.onnx.TrainingMode.TRAINING)
    g, _ = grads(opt, fr, t, f"{t}/{name}.onnx", name)
    return np.asarray(g["w"], np.float64)


def check_distributions(opt, fr, t, x):
    for i, (name, draw) in enumerate(DRAWS.items()):
        mlir = f"{t}/d{i}.mlir"
        fsdp_trace.trace(Weighted(draw), {"x": x}, seed=11 + i).save(mlir)
        g, _ = grads(opt, fr, t, mlir, f"d{i}")
        judge(name, np.sort(np.asarray(g["w"], np.float64)), "")
        if EXPORTER and name in ONNX_DRAWS:
            judge(name, np.sort(exported_draws(opt, fr, t, x, draw, f"o{i}")), "ONNX ")


def judge(name, v, door):
    """The sorted draws `v` against the distribution `name` names."""
    F_ = cdf(name, v)
    name = door + name
    if F_ is not None:
        emp_hi = np.arange(1, N + 1) / N
        d = max(np.max(emp_hi - F_), np.max(F_ - (emp_hi - 1 / N)))
        bound = math.sqrt(-math.log(1e-6 / 2) / 2) / math.sqrt(N)
        check(d < bound, f"{name}: Kolmogorov-Smirnov distance {d:.4f} < {bound:.4f}")
        mean, var = MOMENTS[name[len(door):]]
        se = math.sqrt(var / N)
        check(abs(v.mean() - mean) < 6 * se, f"{name}: mean {v.mean():.4f} within 6 "
              f"standard errors of {mean:.4f}")
        check(abs(v.var() - var) < 8 * var * math.sqrt(8 / N),
              f"{name}: variance {v.var():.4f} near {var:.4f}")
        support = {"rand": (0, 1), "rand(size)": (0, 1), "uniform_(-1, 2)": (-1, 2),
                   "exponential_(2)": (0, 20), "rrelu slopes": (0.1, 0.3)}
        if name[len(door):] in support:
            lo, hi = support[name[len(door):]]
            check(v[0] >= lo and v[-1] < hi, f"{name}: every draw in [{lo}, {hi})")
    elif "bernoulli" in name:
        p = 0.3 if "0.3" in name else 0.8
        ok = np.all((v == 0) | (v == 1))
        rate = v.mean()
        sd = math.sqrt(p * (1 - p) / N)
        check(ok and abs(rate - p) < 6 * sd,
              f"{name}: values 0 or 1, rate {rate:.4f} within 6 sd of {p}")
    else:
        lo, hi = (3, 10) if "3, 10" in name else (0, 5)
        values, counts = np.unique(v, return_counts=True)
        k = hi - lo
        sd = math.sqrt(N * (1 / k) * (1 - 1 / k))
        check(list(values) == list(range(lo, hi)) and
              np.all(np.abs(counts - N / k) < 6 * sd),
              f"{name}: each of {lo}..{hi - 1} drawn, counts {counts.min()}-"
              f"{counts.max()} within 6 sd of {N / k:.0f}")


def check_sampling(opt, fr, t, x):
    """multinomial with and without replacement (a zero weight among
    them) and randperm, by their frequencies."""
    def drawn(name, draw):
        fsdp_trace.trace(Weighted(draw), {"x": x}).save(f"{t}/{name}.mlir")
        g, _ = grads(opt, fr, t, f"{t}/{name}.mlir", name)
        return np.asarray(g["w"], np.float64)
    weights = torch.tensor([0.2, 0.0, 1.2, 0.6])
    p = (weights / weights.sum()).double().numpy()
    def counts_of(a):  # how often each of 0..3 (anything else fails the range check)
        return np.array([int((a == j).sum()) for j in range(4)])
    with_replacement = lambda x: torch.multinomial(weights, N, replacement=True).to(x.dtype)  # noqa: E731
    doors = [("", drawn("mr", with_replacement))]
    if EXPORTER:  # (Log, then ONNX's Multinomial)
        doors.append(("ONNX ", exported_draws(opt, fr, t, x, with_replacement, "omr")))
    for door, v in doors:
        counts = counts_of(v)
        sd = np.sqrt(N * p * (1 - p))
        check(np.all(v == np.round(v)) and v.min() >= 0 and v.max() < 4 and counts[1] == 0
              and np.all(np.abs(counts - N * p) <= 6 * sd + 1e-9),
              f"{door}multinomial with replacement: counts {counts.tolist()} within 6 sd of "
              f"{(N * p).round().tolist()}, the zero weight never drawn")
    # Without replacement: 20,000 rows of weights (1, 0, 3, 4), two each.
    row = torch.tensor([1.0, 0.0, 3.0, 4.0])
    v = drawn("mn", lambda x: torch.multinomial(
        x.reshape(N // 2, 2)[:, :1] * row, 2).reshape(N).to(x.dtype)).reshape(N // 2, 2)
    q = (row / row.sum()).double().numpy()
    first, second = counts_of(v[:, 0]), counts_of(v[:, 1])
    expect2 = np.array([sum(q[i] * q[j] / (1 - q[i]) for i in range(4) if i != j)
                        for j in range(4)])
    rows = N // 2
    check(np.all(v[:, 0] != v[:, 1]) and v.min() >= 0 and v.max() < 4 and first[1] == 0 and second[1] == 0 and
          np.all(np.abs(first - rows * q) <= 6 * np.sqrt(rows * q * (1 - q)) + 1e-9) and
          np.all(np.abs(second - rows * expect2) <=
                 6 * np.sqrt(rows * expect2 * (1 - expect2)) + 1e-9),
          f"multinomial without replacement: two distinct a row; first {first.tolist()} "
          f"(expected {(rows * q).round().tolist()}), second {second.tolist()} (expected "
          f"{(rows * expect2).round().tolist()}), the zero weight never drawn")
    v = drawn("rp", lambda x: torch.randperm(N).to(x.dtype))
    position = np.arange(N)
    corr = float(np.corrcoef(v, position)[0, 1])
    moved = float(np.abs(v - position).mean())
    check(np.array_equal(np.sort(v), position) and abs(corr) < 6 / math.sqrt(N) and
          abs(moved - (N * N - 1) / (3 * N)) < 0.02 * N,
          f"randperm({N}): a permutation, correlation with the position {corr:+.4f}, mean "
          f"displacement {moved:.0f} (a uniform permutation: {(N * N - 1) / (3 * N):.0f})")


class Normal(nn.Module):
    """torch.normal(mean, std) with parameters: PyTorch gives them no
    gradient; w (Σ w·draw) keeps the step differentiable."""

    def __init__(self):
        super().__init__()
        self.mean = nn.Parameter(torch.full((N,), 0.5))
        self.std = nn.Parameter(torch.full((N,), 2.0))
        self.w = nn.Parameter(torch.ones(N))

    def forward(self, x):
        return (self.w * torch.normal(self.mean, self.std)).sum()


class Vae(nn.Module):
    """The reparameterisation trick at μ = 0, logvar = 0."""

    def __init__(self):
        super().__init__()
        self.mu = nn.Parameter(torch.zeros(N))
        self.logvar = nn.Parameter(torch.zeros(N))

    def forward(self, x):
        z = self.mu + torch.exp(0.5 * self.logvar) * torch.randn_like(self.mu)
        return (z * z).sum() * 0.5


class Rrelu(nn.Module):
    """Σ rrelu(w) over a w of both signs: piecewise linear, so the loss is
    Σ w·grad(w) when forward and backward use the same slopes."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(N, generator=torch.Generator().manual_seed(6)))

    def forward(self, x):
        return F.rrelu(self.w * x, 0.1, 0.3, training=True).sum()


class Noisy(nn.Module):
    """A classifier with Gaussian noise on its hidden activations, a
    Bernoulli mask, Gumbel-softmax over its logits, and a uniform jitter."""

    def __init__(self, d=16):
        super().__init__()
        torch.manual_seed(0)
        self.inp = nn.Linear(8, d)
        self.mid = nn.Linear(d, d)
        self.out = nn.Linear(d, 4)

    def forward(self, x, y):
        h = torch.tanh(self.inp(x))
        h = h + 0.1 * torch.randn_like(h)
        h = h * torch.bernoulli(torch.full_like(h, 0.9))
        h = torch.tanh(self.mid(h * torch.empty_like(h).uniform_(0.9, 1.1)))
        p = F.gumbel_softmax(self.out(h), tau=0.5)
        return ((p - y) ** 2).mean()


class PhiMoE(nn.Module):
    """transformers' PhiMoE (a model nobody here wrote): in training its
    router samples the experts (SparseMixer: exponential_ and rand_like,
    uniform jitter), so each step draws. The loss is the model's own."""

    def __init__(self):
        super().__init__()
        import transformers
        torch.manual_seed(0)
        cfg = transformers.PhimoeConfig(
            vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
            attention_dropout=0.0, num_local_experts=4, num_experts_per_tok=2,
            experts_implementation="batched_mm")
        cfg.use_cache = False
        self.model = transformers.PhimoeForCausalLM(cfg)

    def forward(self, input_ids, labels):
        return self.model(input_ids=input_ids, labels=labels).loss

    @staticmethod
    def batch(gen):
        ids = torch.randint(0, 128, (4, 16), generator=gen)
        return {"input_ids": ids, "labels": ids}


class Mae(nn.Module):
    """transformers' ViTMAEForPreTraining: masked-autoencoder pretraining,
    which hides a random 75% of each image's patches (torch.rand noise,
    argsort, gather) at every step. `noise`: PyTorch's reference masks."""

    def __init__(self):
        super().__init__()
        import transformers
        torch.manual_seed(0)
        cfg = transformers.ViTMAEConfig(
            image_size=32, patch_size=8, num_channels=3, hidden_size=32, num_hidden_layers=2,
            num_attention_heads=4, intermediate_size=64, decoder_hidden_size=16,
            decoder_num_hidden_layers=1, decoder_num_attention_heads=2,
            decoder_intermediate_size=32, mask_ratio=0.75, hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0)
        self.model = transformers.ViTMAEForPreTraining(cfg)

    def forward(self, pixel_values, noise=None):
        return self.model(pixel_values=pixel_values, noise=noise).loss

    @staticmethod
    def batch(gen):
        return {"pixel_values": torch.randn(4, 3, 32, 32, generator=gen)}


def check_transformers(opt, fr, t):
    """Where transformers is installed (the torch 2.x venv): models that
    draw in training (PhiMoE's router, ViTMAE's masks) trace, draw in the
    plan alike on 1 and 2 ranks, and at lr 0 their loss still moves from
    step to step (draws folded into constants would repeat it). MAE's first
    loss lies within the range of PyTorch's own over 400 masks."""
    if importlib.util.find_spec("transformers") is None:
        print("skip  PhiMoE, ViTMAE: no transformers here")
        return
    for cls in (PhiMoE, Mae):
        name = cls.__name__
        m = cls()
        data = cls.batch(torch.Generator().manual_seed(2))
        np.savez(f"{t}/{name}.npz", **{k: v.numpy() for k, v in data.items()})
        seen = {}
        for world, lr in ((1, "1e-3"), (2, "1e-3"), (1, "0")):
            mlir = f"{t}/{name}{world}.mlir"
            fsdp_trace.trace(m, {k: v[:4 // world] for k, v in data.items()}).save(mlir)
            plan = f"{t}/{name}{world}-{lr}.plan"
            run([opt, mlir, "-o", plan, "--world-size", str(world), "--lr", lr])
            launch = MPIRUN + ["-np", str(world)] if world > 1 else []
            run(launch + [fr, plan, "--data", f"{t}/{name}.npz", "--steps", "3", "--quiet",
                          "--log", f"{t}/{name}{world}-{lr}.jsonl"])
            seen[(world, lr)] = losses(f"{t}/{name}{world}-{lr}.jsonl")
        one, two, still = seen[(1, "1e-3")], seen[(2, "1e-3")], seen[(1, "0")]
        check(all(math.isfinite(v) for v in one) and np.allclose(two, one, rtol=1e-4),
              f"{name}: losses {['%.5f' % v for v in one]} on 1 rank, "
              f"{['%.5f' % v for v in two]} on 2")
        check(len(set(still)) == len(still), f"{name} at lr 0: each step draws anew "
              f"(losses {['%.7f' % v for v in still]})")
        if cls is Mae:
            gen = torch.Generator().manual_seed(3)
            with torch.no_grad():
                ref = [float(m(data["pixel_values"], torch.rand(4, 16, generator=gen)))
                       for _ in range(400)]
            check(min(ref) <= one[0] <= max(ref),
                  f"{name}: first loss {one[0]:.5f} within PyTorch's over 400 masks "
                  f"[{min(ref):.5f}, {max(ref):.5f}] (mean {np.mean(ref):.5f})")


def main():
    opt, fr = tools()
    with tempfile.TemporaryDirectory() as t:
        x = torch.ones(N)
        np.savez(f"{t}/ones.npz", x=x.numpy())
        check_distributions(opt, fr, t, x)
        check_sampling(opt, fr, t, x)

        fsdp_trace.trace(Normal(), {"x": x}).save(f"{t}/normal.mlir")
        g, _ = grads(opt, fr, t, f"{t}/normal.mlir", "normal")
        w = np.asarray(g["w"], np.float64)
        check(abs(w.mean() - 0.5) < 6 * 2 / math.sqrt(N) and abs(w.std() - 2) < 0.05,
              f"torch.normal(mean 0.5, std 2): mean {w.mean():.3f}, std {w.std():.3f}")
        zero = [k for k in ("mean", "std") if k in g and np.any(np.asarray(g[k]) != 0)]
        check(not zero, "torch.normal: its mean and std get no gradient, as in PyTorch")

        fsdp_trace.trace(Vae(), {"x": x}).save(f"{t}/vae.mlir")
        g, steps = grads(opt, fr, t, f"{t}/vae.mlir", "vae", steps=2)
        eps = np.asarray(g["mu"], np.float64)
        check(np.allclose(np.asarray(g["logvar"], np.float64), eps * eps / 2, rtol=1e-5,
                          atol=1e-7),
              "reparameterisation: grad(logvar) = grad(mu)^2/2 (one epsilon, forward and "
              "backward)")
        check(abs(steps[1] - steps[0]) > 1e-3 * steps[0], f"reparameterisation: step 2 "
              f"draws another epsilon (losses {steps[0]:.1f}, {steps[1]:.1f})")
        _, again = grads(opt, fr, t, f"{t}/vae.mlir", "vae2", steps=2)
        check(again == steps, "a rerun draws the same values")
        _, emulated = grads(opt, fr, t, f"{t}/vae.mlir", "vae3", steps=2, backend="emulated")
        check(np.allclose(emulated, steps, rtol=1e-6),
              f"the emulated device backend draws the CPU's values ({emulated} {steps})")

        # A skipped update (a non-finite gradient, --on-nonfinite=skip)
        # does not hold the draws back: they are keyed by the batch's number
        # in the run, the optimizer's step (AdamW's bias correction) by the
        # updates applied. Three steps of Σ w·U·x at lr 0, the first batch
        # finite or holding an inf: steps 2 and 3 draw alike either way.
        fsdp_trace.trace(Weighted(lambda x: torch.rand_like(x) * x), {"x": x}).save(
            f"{t}/skip.mlir")
        run([opt, f"{t}/skip.mlir", "-o", f"{t}/skip.plan", "--optimizer", "sgd", "--lr", "0"])
        seen = []
        for first, backend in ((1.0, "cpu"), (float("inf"), "cpu"), (float("inf"), "emulated")):
            batches = np.ones(3 * N, np.float32)
            batches[7] = first
            np.savez(f"{t}/skip.npz", x=batches)
            run([fr, f"{t}/skip.plan", "--data", f"{t}/skip.npz", "--steps", "3", "--quiet",
                 "--on-nonfinite=skip", "--log", f"{t}/skip.jsonl", "--backend", backend])
            seen.append(losses(f"{t}/skip.jsonl"))
        (a1, a2, a3), (b1, b2, b3), device = seen
        check(not math.isfinite(float(b1)) and (b2, b3) == (a2, a3) and a2 != a1 and
              np.allclose(device[1:], [b2, b3], rtol=1e-6),
              f"a skipped update draws anew at the next step, on the CPU and the emulated "
              f"device (losses {a1:.1f} {a2:.1f} {a3:.1f}; after a skip {b1} {b2:.1f} "
              f"{b3:.1f}; emulated {device[1]:.1f} {device[2]:.1f})")

        fsdp_trace.trace(Rrelu(), {"x": x}).save(f"{t}/rrelu.mlir")
        g, steps = grads(opt, fr, t, f"{t}/rrelu.mlir", "rrelu")
        w = Rrelu().w.detach().double().numpy()
        gw = np.asarray(g["w"], np.float64)
        pos = w > 0
        check(np.all(gw[pos] == 1) and np.all((gw[~pos] >= 0.1) & (gw[~pos] < 0.3)) and
              abs(steps[0] - float(np.sum(w * gw))) < 1e-4 * float(np.abs(w).sum()),
              "rrelu: gradient 1 where w > 0, the drawn slope elsewhere, and the loss "
              "sum(w * grad): one slope in forward and backward")

        # bf16: draws of 8 bits, below 1; exponential's finite.
        fsdp_trace.trace(Weighted(DRAWS["rand"]), {"x": x}).save(f"{t}/b.mlir")
        g, _ = grads(opt, fr, t, f"{t}/b.mlir", "b", ["--compute-dtype=bf16"])
        u = np.asarray(g["w"], np.float64)
        check(u.min() >= 0 and u.max() < 1 and np.all(u * 256 == np.round(u * 256)),
              f"bf16: uniform draws in [0, {u.max()}], multiples of 2^-8")
        fsdp_trace.trace(Weighted(DRAWS["exponential_(2)"]), {"x": x}).save(f"{t}/be.mlir")
        g, _ = grads(opt, fr, t, f"{t}/be.mlir", "be", ["--compute-dtype=bf16"])
        e = np.asarray(g["w"], np.float64)
        check(np.all(np.isfinite(e)) and e.min() >= 0,
              f"bf16: exponential draws finite, largest {e.max():.2f}")

        # bf16: randint(0, 1000)'s integers are drawn in f32 (bf16 holds
        # integers exactly only to 256): every row drawn, about N/1000 times.
        fsdp_trace.trace(Picked(), {"x": x}).save(f"{t}/bi.mlir")
        g, _ = grads(opt, fr, t, f"{t}/bi.mlir", "bi", ["--compute-dtype=bf16"])
        n = np.asarray(g["w"], np.float64)
        chi2 = float(((n - N / 1000) ** 2).sum() / (N / 1000))
        check(n.min() > 0 and n.sum() == N and chi2 < 999 + 6 * math.sqrt(2 * 999),
              f"bf16: randint(0, 1000) draws every value (fewest {n.min():.0f}, most "
              f"{n.max():.0f} of {N}; chi-square {chi2:.0f}, 999 degrees of freedom)")

        # World sizes and recomputation: one global batch of 8.
        m = Noisy()
        gen = torch.Generator().manual_seed(1)
        xs, ys = torch.randn(8, 8, generator=gen), torch.rand(8, 4, generator=gen)
        np.savez(f"{t}/noisy.npz", x=xs.numpy(), y=ys.numpy())
        seen = {}
        for world in (1, 2):
            fsdp_trace.trace(m, {"x": xs[:8 // world], "y": ys[:8 // world]}).save(
                f"{t}/n{world}.mlir")
            for ac in ("none", "units"):
                plan = f"{t}/n{world}{ac}.plan"
                run([opt, f"{t}/n{world}.mlir", "-o", plan, "--world-size", str(world),
                     "--lr", "1e-2", "--activation-checkpointing", ac])
                launch = MPIRUN + ["-np", str(world)] if world > 1 else []
                run(launch + [fr, plan, "--data", f"{t}/noisy.npz", "--steps", "4", "--quiet",
                              "--log", f"{t}/n{world}{ac}.jsonl"])
                seen[(world, ac)] = losses(f"{t}/n{world}{ac}.jsonl")
        base = seen[(1, "none")]
        check(len(set(base)) == len(base), f"noisy MLP: losses {['%.5f' % v for v in base]}")
        for key, got in seen.items():
            check(np.allclose(got, base, rtol=2e-5, atol=1e-7),
                  f"noisy MLP on {key[0]} rank(s), activation checkpointing {key[1]}: the "
                  f"1-rank losses")
        check_transformers(opt, fr, t)
    if failures:
        print(f"draws: {len(failures)} check(s) failed")
        return 1
    print("draws: every check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
