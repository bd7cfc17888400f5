"""The ONNX ops torch.onnx.export writes for everyday modules, imported,
stepped and compared with PyTorch.

Each case is one function of a parameter p (and a fixed input x): the
module computes f(p * x), weighs it by a fixed ramp and sums it, so the
loss is linear in f's outputs and the gradient of p passes through f's
own. It is exported by torch.onnx.export (opset 17, training mode, no
constant folding), compiled by fsdp-opt and stepped once by fsdp-run; the
loss and p's gradient are compared with PyTorch's float64 step, within 10x
PyTorch float32's own distance from it (a floor of 1e-5). A case whose
export PyTorch itself refuses is reported and not counted.

    onnx_export_ops.py --fsdp-opt build/tools/fsdp-opt --fsdp-run build/tools/fsdp-run [--only a,b]
"""
import argparse
import json
import os
import sys
import tempfile
import warnings

import numpy as np
import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bounded  # noqa: E402  (subprocess.run with a deadline)
from parity import read_safetensors  # noqa: E402

F = nn.functional
TOLERANCE_FACTOR, FLOOR = 10.0, 1e-5
SHAPE = (2, 4, 6, 6)


GATHER_INDEX = torch.randint(0, SHAPE[-1], SHAPE, generator=torch.Generator().manual_seed(3))
# Each row's positions once (scatter's writes do not collide), the first
# four of a permutation.
SCATTER_INDEX = torch.stack([torch.randperm(SHAPE[-1], generator=torch.Generator().manual_seed(r))[:4]
                             for r in range(SHAPE[0] * SHAPE[1] * SHAPE[2])]).reshape(*SHAPE[:3], 4)

def _rows_from(x, n, rows):
    """n row numbers in [-rows, rows) read from x's values (repeats
    likely; negative ones counted from the end)."""
    return ((x.detach().reshape(-1)[:n].abs() * 3).floor().long() % (2 * rows)) - rows


# 3-D convolutions (the video classifiers: r3d, mc3, r2plus1d, s3d) over
# the input as clips [2, 2, 2, 6, 6]: strided, dilated, padded and grouped.
_G3 = torch.Generator().manual_seed(5)
CONV3D_W = torch.randn(4, 1, 3, 2, 3, generator=_G3) * 0.3
CONV3D_B = torch.randn(4, generator=_G3) * 0.1
CONV3D_T = torch.randn(2, 3, 2, 3, 2, generator=_G3) * 0.3


def _clips(x):
    return x.reshape(2, 2, 2, 6, 6)


# name -> (f, input shape): f of a float tensor; every module below is one
# torch.onnx.export writes as an op of its own (LeakyRelu, Resize, ...) or
# as a pattern of ops (std: a ReduceProd of the shape).
CASES = {
    "leaky_relu": nn.LeakyReLU(0.1),
    "elu": nn.ELU(0.7),
    "selu": nn.SELU(),
    "celu": nn.CELU(0.5),
    # 1.13's exporter writes these scalars, and the product, in float64:
    # computed in float32, as PyTorch computes them.
    "where_scalars": lambda x: torch.where(x > 1.0, 2.0, 0.5) * x,
    "isnan": lambda x: torch.where(torch.isnan(x.log()), x * 0.5, x),
    "isinf": lambda x: torch.where(torch.isinf(x / (x > 0.3).float()), x, x * 3.0),
    "amin": lambda x: x.amin(-1),
    "min_dim": lambda x: x.min(1).values,
    "prod": lambda x: x.prod(-1),
    "logsumexp": lambda x: x.logsumexp(-1),
    "norm_p1": lambda x: x.norm(p=1, dim=(-2, -1)),
    "std": lambda x: x.std(-1),
    "var_mean": lambda x: torch.var_mean(x, (1, 2))[0],
    "repeat": lambda x: x.repeat(1, 2, 1, 3),
    "gather": lambda x: x.gather(-1, GATHER_INDEX),
    "scatter": lambda x: x.scatter(-1, SCATTER_INDEX, x[..., :4] * 3.0),
    # Positions written twice (GATHER_INDEX repeats within a row; an index
    # from the data): the last writer stays, and every writer gets the
    # position's gradient, as torch.scatter's backward gives it.
    "scatter_duplicates": lambda x: x.scatter(-1, GATHER_INDEX[..., :5], x[..., 1:] * 3.0),
    "scatter_data_index": lambda x: x.scatter(
        -1, (x.detach() * 2).floor().long().clamp(0, SHAPE[-1] - 1), x * 3.0 + 1.0),
    # x[idx] = v and x[idx] += v with indices from the data (ScatterND on
    # the step's values): rows written twice keep the last writer, and
    # every writer gets the row's gradient, as index_put's backward.
    "index_put_rows": lambda x: x.reshape(8, 36).index_put(
        (_rows_from(x, 5, 4),), x.reshape(8, 36)[:5] * 3.0 + 1.0),
    "index_put_accumulate": lambda x: x.reshape(8, 36).index_put(
        (_rows_from(x, 5, 4),), x.reshape(8, 36)[:5] * 3.0 + 1.0, accumulate=True),
    "index_put_pairs": lambda x: x.reshape(8, 36).index_put(
        (_rows_from(x, 6, 8), _rows_from(x * 7.0, 6, 36)), x.reshape(-1)[:6] * 2.0),
    # index_add with repeated rows (a MoE's combine, top-2 routing: each
    # token twice), which 1.13's exporter writes as x + ScatterElements
    # into zeros without reduction: the repeats add. A multi-hot built by
    # scatter of 1.0 into zeros with repeats: the value once.
    "index_add_repeats": lambda x: x.reshape(8, 36).index_add(
        0, _rows_from(x, 6, 4) % 8, x.reshape(8, 36)[:6] * 2.0),
    "multi_hot": lambda x: x.reshape(8, 36) * torch.zeros(8, 36).scatter(
        1, (_rows_from(x, 24, 18) % 36).reshape(8, 3), 1.0),
    "scatter_add": lambda x: x.scatter_add(-1, GATHER_INDEX[..., :5], x[..., 1:] * 2.0),
    "one_hot": lambda x: x * F.one_hot(GATHER_INDEX[..., 0], SHAPE[-1]).float(),
    "tan": lambda x: torch.tan(x * 0.5),
    "flip": lambda x: x.flip(-1),
    "flip_two": lambda x: x.flip(1, 2),
    "pixel_shuffle": nn.PixelShuffle(2),
    # Mod: C's fmod on floats; Python's % and a floor division on int64
    # values computed from the data (a position modulo a length).
    "fmod": lambda x: torch.fmod(x * 3.0, 0.7),
    "remainder_positions": lambda x: x * ((x * 10).long() % 3).float(),
    # Neg and Abs of int64 values (fsdp-run refused them: float kernels).
    "neg_positions": lambda x: x * (-(x * 10).long()).float(),
    "abs_positions": lambda x: x * ((x * 10 - 5).long().abs()).float(),
    "floor_divide_positions": lambda x: x * torch.div((x * 10).long(), -4, rounding_mode="floor").float(),
    "conv3d": lambda x: F.conv3d(_clips(x), CONV3D_W.to(x.dtype), CONV3D_B.to(x.dtype),
                                 stride=(2, 1, 2), padding=(2, 1, 0), dilation=(1, 2, 1),
                                 groups=2),
    "conv3d_dense": lambda x: F.conv3d(_clips(x), CONV3D_W.reshape(2, 2, 3, 2, 3).to(x.dtype),
                                       padding=1),
    "conv_transpose3d": lambda x: F.conv_transpose3d(_clips(x), CONV3D_T.to(x.dtype),
                                                     stride=(2, 1, 2), padding=(1, 0, 1),
                                                     output_padding=(1, 0, 0)),
    "max_pool3d": lambda x: F.max_pool3d(_clips(x), (2, 3, 2), stride=(1, 2, 2), padding=(1, 1, 0)),
    "max_pool3d_ceil": lambda x: F.max_pool3d(_clips(x), 2, stride=(2, 2, 4), ceil_mode=True),
    "avg_pool3d": lambda x: F.avg_pool3d(_clips(x), (2, 3, 3), stride=(1, 1, 2)),
    "cumsum": lambda x: x.cumsum(-1),
    "cumsum_dim1": lambda x: x.cumsum(1),
    # Position ids from a mask (int64), as RoBERTa computes them.
    "cumsum_positions": lambda x: x * ((x > 0.9).long().cumsum(-1) * (x > 0.9).long()).float(),
    # An index computed from the data (TopK's) into GatherElements.
    "gather_data_index": lambda x: x.gather(-1, x.argsort(-1, descending=True)) * x,
    "topk": lambda x: x.topk(3, -1).values,
    "topk_smallest": lambda x: x.topk(2, 1, largest=False).values,
    "sort": lambda x: x.sort(-1).values,
    "argmax": lambda x: x * x.argmax(-1, keepdim=True).float(),
    # Integers past 2^24 (float32's reach): sorted and compared exactly.
    # (2^40 + k rounds to 2^40 in float32 for every |k| < 2^16.)
    "sort_int64": lambda x: x * (2**40 + (x * 1000).long()).sort(-1).indices.float(),
    "argmax_int64": lambda x: x * (2**40 + (x * 1000).long()).argmax(2, keepdim=True).float(),
    "argmin_int64": lambda x: x * (2**40 - (x * 1000).long()).argmin(-1, keepdim=True).float(),
    "argmin": lambda x: x * x.argmin(2, keepdim=True).float(),
    # Attention and projections written as einsum.
    "einsum_scores": lambda x: torch.einsum("bhqd,bhkd->bhqk", x, x.flip(-1)),
    "einsum_values": lambda x: torch.einsum("bhqk,bhkd->bhqd", x.softmax(-1), x),
    "einsum_ellipsis": lambda x: torch.einsum("...ij,jk->...ik", x, x[0, 0]),
    "einsum_outer_sum": lambda x: torch.einsum("bcij,bcik->bjk", x, x),
    "einsum_one": lambda x: torch.einsum("bcij->bji", x),
    "upsample_nearest": nn.Upsample(scale_factor=2),
    "upsample_nearest_size": nn.Upsample(size=(9, 15)),
    "upsample_bilinear": nn.Upsample(scale_factor=2, mode="bilinear"),
    "upsample_bilinear_align": nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True),
    "upsample_bilinear_down": nn.Upsample(size=(4, 5), mode="bilinear"),
    "upsample_bicubic": nn.Upsample(scale_factor=2, mode="bicubic"),
    "upsample_linear_1d": lambda x: F.interpolate(x.flatten(2), scale_factor=1.5, mode="linear"),
}


class Case(nn.Module):
    def __init__(self, f):
        super().__init__()
        g = torch.Generator().manual_seed(1)
        self.p = nn.Parameter(torch.rand(SHAPE, generator=g) * 2 - 0.5)
        self.f = f

    def forward(self, x):
        y = self.f(self.p * x)
        ramp = torch.linspace(0.5, 1.5, y.numel()).reshape(y.shape).to(y.dtype)
        return (y * ramp).sum()


def reference(f, x, dtype):
    m = Case(f).to(dtype)
    loss = m(x.to(dtype))
    loss.backward()
    return float(loss), m.p.grad.double().numpy()


def run_case(name, f, tools, tmp):
    x = torch.linspace(0.6, 1.4, int(np.prod(SHAPE))).reshape(SHAPE)
    base = os.path.join(tmp, name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            torch.onnx.export(Case(f), (x,), base + ".onnx", input_names=["x"],
                              output_names=["loss"], opset_version=17,
                              do_constant_folding=False,
                              training=torch.onnx.TrainingMode.TRAINING)
        except Exception as e:  # noqa: BLE001 - PyTorch's exporter refuses it
            return "exporter", str(e).splitlines()[0][:120]
    np.savez(base + ".npz", x=x.numpy())
    r = bounded.run([tools[0], base + ".onnx", "-o", base + ".plan"],
                    capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        why = [line for line in r.stderr.splitlines() if "error" in line][:1]
        return ("fsdp-opt" if r.returncode == 1 else "CRASH fsdp-opt",
                (why[0] if why else r.stderr[-160:]).strip()[-160:])
    r = bounded.run([tools[1], base + ".plan", "--data", base + ".npz", "--steps", "1",
                     "--quiet", "--log", base + ".log", "--dump-grads", base + ".g.safetensors"],
                    capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        return ("fsdp-run" if r.returncode == 1 else "CRASH fsdp-run", r.stderr.strip()[-160:])
    loss64, g64 = reference(f, x, torch.float64)
    loss32, g32 = reference(f, x, torch.float32)
    with open(base + ".log") as fh:
        loss = json.loads(fh.readline())["loss"]
    scale = max(abs(loss64), 1.0)
    if abs(loss - loss64) / scale > max(TOLERANCE_FACTOR * abs(loss32 - loss64) / scale, FLOOR):
        return "wrong", f"loss {loss!r}, PyTorch float64 {loss64!r} (float32 {loss32!r})"
    ours = np.asarray(read_safetensors(base + ".g.safetensors")["p"], np.float64).reshape(SHAPE)
    size = max(np.abs(g64).max(), 1e-4)
    worst, worst32 = np.abs(ours - g64).max() / size, np.abs(g32 - g64).max() / size
    detail = f"grad {worst:.1e} (torch f32 {worst32:.1e})"
    if not worst <= max(TOLERANCE_FACTOR * worst32, FLOOR):
        return "wrong", detail
    return "ok", detail


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fsdp-opt", required=True)
    ap.add_argument("--fsdp-run", required=True)
    ap.add_argument("--only", help="comma-separated case names")
    a = ap.parse_args()
    only = set(a.only.split(",")) if a.only else None
    print(f"PyTorch {torch.__version__}", flush=True)
    counts = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, f in CASES.items():
            if only and name not in only:
                continue
            verdict, detail = run_case(name, f, (a.fsdp_opt, a.fsdp_run), tmp)
            counts[verdict] = counts.get(verdict, 0) + 1
            print(f"{verdict:14s} {name:26s} {detail}", flush=True)
    tried = sum(n for v, n in counts.items() if v != "exporter")
    print(f"onnx export ops: {counts.get('ok', 0)} of {tried} exported cases train as PyTorch "
          f"({', '.join(f'{n} {v}' for v, n in sorted(counts.items()))})")
    return 0 if counts.get("ok", 0) == tried else 1


if __name__ == "__main__":
    sys.exit(main())
