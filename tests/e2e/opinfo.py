"""Op coverage on PyTorch's own operator database (OpInfo's op_db).

For every in-scope entry (FAMILIES) and each of its float32 samples: a
module whose parameters are the sample's float tensors (integer and
boolean tensors are step inputs, read from an .npz), whose loss is the sum
of each float output times fixed random weights; traced, compiled, run one
step on one rank, and its gradients judged against PyTorch's float64
gradients relative to PyTorch float32's own error:

    ours = max|g - g64| / max(max|g64|, 1),  torch32 = the same for PyTorch f32,
    ok when ours <= max(TOLERANCE_FACTOR * torch32, FLOOR).

An entry passes when every sample tried passes. Prints a line per entry,
then N/M per family, then the out-of-scope entries with their reasons.

    opinfo.py --fsdp-opt build/tools/fsdp-opt --fsdp-run build/tools/fsdp-run
              [--samples K] [--only NAME,...] [--family F] [--json OUT]

`--samples 1` (make test) tries each entry's first sample; the default
tries up to 4 (make opinfo).
"""
import argparse
import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "stub"))       # expecttest
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
from torch.utils._pytree import tree_flatten, tree_unflatten  # noqa: E402

import bounded  # noqa: E402  (subprocess.run with a deadline)
import fsdp_trace  # noqa: E402
from parity import read_safetensors  # noqa: E402

TOLERANCE_FACTOR = 10.0
FLOOR = 1e-5

# family -> in-scope op_db entries ("name" or "name.variant").
FAMILIES = {
    "activation": """nn.functional.relu nn.functional.elu nn.functional.celu nn.functional.selu
        nn.functional.silu nn.functional.hardsigmoid nn.functional.logsigmoid nn.functional.mish
        nn.functional.softsign nn.functional.tanhshrink nn.functional.threshold
        nn.functional.softshrink nn.functional.hardshrink nn.functional.hardtanh
        nn.functional.relu6 nn.functional.leaky_relu nn.functional.gelu nn.functional.glu
        nn.functional.softplus nn.functional.hardswish nn.functional.prelu sigmoid tanh logit""",
    "unary": """abs neg positive exp exp2 expm1 log log1p log2 log10 sqrt rsqrt reciprocal square
        sin cos tan sinh cosh asin acos atan asinh acosh atanh erf erfc erfinv sign sgn ceil floor
        round trunc frac clone contiguous nan_to_num sinc deg2rad rad2deg""",
    "binary": """add sub rsub mul div.no_rounding_mode div.trunc_rounding div.floor_rounding
        true_divide pow maximum minimum fmax fmin max.binary min.binary fmod remainder
        atan2 hypot copysign clamp clamp_min clamp_max lerp addcmul addcdiv where masked_fill
        xlogy logaddexp __radd__ __rsub__ __rmul__ __rdiv__ __rpow__""",
    "reduction": """sum mean amax amin prod std var std_mean var_mean logsumexp nansum nanmean
        max.reduction_with_dim max.reduction_no_dim min.reduction_with_dim min.reduction_no_dim
        norm linalg.vector_norm softmax log_softmax nn.functional.softmin nn.functional.normalize
        nn.functional.cosine_similarity nn.functional.pairwise_distance""",
    "scan": "cumsum cumprod logcumsumexp cummax cummin",
    "shape": """reshape view view_as reshape_as flatten unflatten ravel squeeze unsqueeze permute
        transpose t T mT movedim expand expand_as broadcast_to repeat tile cat stack hstack vstack
        dstack column_stack split split_with_sizes chunk tensor_split unbind narrow select slice
        flip fliplr flipud roll rot90 tril triu diagonal diag_embed atleast_1d atleast_2d
        atleast_3d constant_pad_nd nn.functional.pad.constant nn.functional.pad.reflect
        nn.functional.pad.replicate nn.functional.pad.circular nn.functional.pixel_shuffle
        nn.functional.pixel_unshuffle unfold nn.functional.unfold""",
    "indexing": """gather index_select take_along_dim __getitem__ scatter scatter_add index_add
        index_fill index_copy nn.functional.embedding""",
    "sort": "sort topk msort kthvalue",
    "matmul": """mm bmm matmul addmm addmv baddbmm addbmm dot mv outer inner einsum
        nn.functional.linear nn.functional.bilinear tensordot""",
    "convolution": """nn.functional.conv1d nn.functional.conv2d nn.functional.conv_transpose1d
        nn.functional.conv_transpose2d nn.functional.avg_pool1d nn.functional.avg_pool2d
        nn.functional.max_pool1d nn.functional.max_pool2d nn.functional.adaptive_avg_pool1d
        nn.functional.adaptive_avg_pool2d nn.functional.adaptive_max_pool1d
        nn.functional.adaptive_max_pool2d nn.functional.adaptive_avg_pool3d
        nn.functional.adaptive_max_pool3d nn.functional.interpolate.nearest
        nn.functional.interpolate.linear nn.functional.interpolate.bilinear
        nn.functional.upsample_nearest nn.functional.upsample_bilinear nn.functional.conv3d""",
    "normalization": """nn.functional.layer_norm nn.functional.batch_norm nn.functional.group_norm
        nn.functional.instance_norm native_layer_norm native_batch_norm
        nn.functional.local_response_norm nn.functional._scaled_dot_product_attention""",
    "loss": """nn.functional.cross_entropy nn.functional.nll_loss nn.functional.mse_loss
        nn.functional.l1_loss nn.functional.smooth_l1_loss nn.functional.huber_loss
        nn.functional.binary_cross_entropy nn.functional.binary_cross_entropy_with_logits
        nn.functional.kl_div nn.functional.soft_margin_loss nn.functional.margin_ranking_loss
        nn.functional.hinge_embedding_loss nn.functional.cosine_embedding_loss
        nn.functional.poisson_nll_loss nn.functional.gaussian_nll_loss
        nn.functional.triplet_margin_loss nn.functional.multilabel_soft_margin_loss
        nn.functional.multi_margin_loss nn.functional.multilabel_margin_loss""",
    # Every other entry of op_db not out of scope below (2026-11-29): many
    # have no float output that depends on a float input (comparisons,
    # integer ops, factories) and are skipped, not counted.
    "more": """H __rand__ __rmatmul__ __rmod__ __ror__ __rxor__ addmm.decomposed addr all allclose
        aminmax any arange argmax argmin argsort argwhere as_strided bfloat16
        bincount bitwise_and bitwise_left_shift bitwise_not bitwise_or bitwise_right_shift
        bitwise_xor block_diag bool broadcast_shapes broadcast_tensors bucketize byte
        cartesian_prod cdist char corrcoef count_nonzero cov cross cumulative_trapezoid diag
        diagflat diagonal_scatter diff dist dsplit empty empty_like eq equal eye fill float
        floor_divide frexp full_like gcd ge gradient gt half heaviside histc histogram
        histogramdd hsplit index_put index_reduce int isclose isfinite isin isinf isnan isneginf
        isposinf isreal kron lcm ldexp le linspace logaddexp2 logical_and logical_not logical_or
        logical_xor logspace long lt mH masked_scatter median meshgrid.list_of_tensors
        meshgrid.variadic_tensors mode nanmedian nanquantile narrow_copy ne new_empty
        new_empty_strided new_full new_ones new_zeros nextafter nn.functional.avg_pool3d
        nn.functional.batch_norm.without_cudnn nn.functional.conv_transpose3d
        nn.functional.grid_sample nn.functional.interpolate.area
        nn.functional.interpolate.bicubic nn.functional.interpolate.trilinear
        nn.functional.max_pool3d nn.functional.max_unpool1d nn.functional.max_unpool1d.grad
        nn.functional.max_unpool2d nn.functional.max_unpool2d.grad nn.functional.max_unpool3d
        nn.functional.max_unpool3d.grad nn.functional.one_hot nn.functional.pdist
        nn.functional.triplet_margin_with_distance_loss norm.fro norm.inf ones ones_like put
        quantile renorm resize_ resize_as_ round.decimals_0 round.decimals_3
        round.decimals_neg_3 scatter_reduce.amax scatter_reduce.amin scatter_reduce.mean
        scatter_reduce.prod scatter_reduce.sum searchsorted select_scatter short signbit
        slice_scatter split.list_args sum_to_size take trace trapezoid trapz tril_indices
        triu_indices vsplit zero_ zeros zeros_like""",
}
FAMILIES = {f: v.split() for f, v in FAMILIES.items()}

# Entries out of scope, by the reason (a prefix or an exact name).
OUT_OF_SCOPE = [
    ("linalg.", "linear-algebra decompositions and solvers"),
    ("fft.", "spectral transforms (complex numbers)"),
    ("sparse.", "sparse tensors"),
    ("masked.", "masked tensors (a prototype API)"),
    ("special.", "special functions no model forward of the zoos uses"),
    ("digamma lgamma i0 igamma igammac", "special functions no model forward of the zoos uses"),
    ("cholesky cholesky_inverse cholesky_solve lu lu_solve lu_unpack qr svd svd_lowrank "
     "pca_lowrank symeig triangular_solve pinverse logdet matrix_exp norm.nuc geqrf ormqr",
     "linear-algebra decompositions and solvers"),
    ("double to softmax.with_dtype log_softmax.dtype nn.functional.softmin.with_dtype "
     "float_power", "float64 results (a plan holds no float64 tensor: refused, naming the dtype)"),
    ("jiterator_2inputs_2outputs jiterator_4inputs_with_extra_args jiterator_binary "
     "jiterator_binary_return_by_ref jiterator_unary", "CUDA-only entries (jiterator)"),
    ("polygamma", "special functions no model forward of the zoos uses"),
    ("mvlgamma", "special functions no model forward of the zoos uses"),
    ("nonzero masked_select unique unique_consecutive repeat_interleave combinations "
     "nn.functional.ctc_loss nn.functional.embedding_bag segment_reduce",
     "output shapes that depend on the data"),
    ("complex polar view_as_complex view_as_real imag angle real conj conj_physical resolve_conj "
     "resolve_neg chalf vdot stft istft nn.functional.silu.complex", "complex numbers"),
    ("to_sparse", "sparse tensors"),
    ("as_strided_scatter",
     "PyTorch's own backward is wrong: its input's gradient is uninitialized memory on "
     "1.13 and lies at the written positions instead of the others on 2.11 (the formula "
     "pytorch/pytorch#77128's review doubted), so nothing compares; a write through "
     "as_strided, which functionalization turns into it, is judged under as_strided"),
    ("normal bernoulli uniform multinomial rand_like randn randn_like randint_like "
     "nn.functional.rrelu nn.functional.dropout nn.functional.dropout2d "
     "nn.functional.dropout3d nn.functional.feature_alpha_dropout nn.functional.alpha_dropout "
     "nn.functional.fractional_max_pool2d nn.functional.fractional_max_pool3d",
     "random draws: their values are PyTorch's generator's, which no other reproduces "
     "(fsdp.dropout is judged by dropout.py; rand, randn, normal, bernoulli, uniform and "
     "randint, rrelu, multinomial and randperm by their distributions in draws.py; "
     "fractional pooling is refused)"),
]


def _extra_samples():
    """Samples op_db lacks, by entry: semantics its own samples never reach."""
    from torch.testing._internal.common_methods_invocations import SampleInput
    g = torch.Generator().manual_seed(1)
    scores = torch.randn(4, 5, generator=g)
    weight = torch.rand(5, generator=g) + 0.5
    weight.step_input = True  # multi_margin_loss has no gradient for it
    cube = torch.randn(4, 5, 6, generator=g)
    class OwnCall(SampleInput):  # a sample with its own call (SampleInput has slots)
        def __init__(self, fn, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.fn = fn

    # x[.., idx, ..] = v as the tracer sees it: aten.index_put, whose
    # indices may hold None (a sliced axis) where torch.index_put's may not.
    def setitem(x, indices, values, accumulate=False):
        return torch.ops.aten.index_put(x, list(indices), values, accumulate)

    def put_sample(x, indices, values, accumulate=False):
        return OwnCall(setitem, x.clone().requires_grad_(),
                       args=(indices, values.clone().requires_grad_()),
                       kwargs={"accumulate": accumulate})
    rows = torch.randn(4, 5, generator=g) > 0
    long = torch.randn(2, 3000, generator=g)
    # Quantiles of rows with NaN (one, two, every element: a step input's
    # mask, the values a parameter), at q whose rank is 1.5 (nearest
    # rounds half to even) and at every interpolation; NaN results as 7.
    hidden = torch.zeros(4, 7, dtype=torch.bool)
    hidden[1, 2] = hidden[3, 0] = hidden[3, 5] = True
    hidden[2, :] = True
    values = torch.randn(4, 7, generator=g)

    def quantiles(fn, interpolation):
        q = torch.tensor([0.15, 0.25, 0.5, 0.9])
        return OwnCall(lambda x, m: torch.nan_to_num(
            fn(x.masked_fill(m, float("nan")), q.to(x.dtype), dim=1, interpolation=interpolation),
            nan=7.0),
            values.clone().requires_grad_(), args=(hidden,))
    interpolations = ("linear", "lower", "higher", "midpoint", "nearest")
    return {
        "quantile": [quantiles(torch.quantile, i) for i in interpolations],
        "nanquantile": [quantiles(torch.nanquantile, i) for i in interpolations],
        # Scans longer than the triangular matrix's bound (2048): position
        # ids from a mask at a long sequence (integers), floats.
        "cumsum": [
            SampleInput(long.clone().requires_grad_(), args=(1,)),
            OwnCall(lambda x, m: x * (m.cumsum(-1) - 1), long.clone().requires_grad_(),
                    args=((torch.rand(2, 3000, generator=g) > 0.3).long(),)),
        ],
        "logcumsumexp": [SampleInput(long[:, :2100].clone().requires_grad_(), args=(-1,))],
        # Repeated values: ties of frequency (the smallest value wins) and
        # the gradient at the value's last occurrence.
        "mode": [SampleInput(torch.tensor([[3.0, 1.0, 2.0, 5.0], [2.0, 2.0, 7.0, 7.0],
                                           [4.0, 1.0, 4.0, 1.0]]).requires_grad_(), args=(1,)),
                 SampleInput(torch.randint(0, 3, (4, 5, 6), generator=g).float().requires_grad_(),
                             args=(0, True)),
                 SampleInput(torch.randint(0, 4, (3, 9), generator=g).float().requires_grad_(),
                             args=(-1,))],
        # frexp where log2 rounds across a power of two (1 - 2^-24 and
        # 2^100 times it), at powers of two, the largest floats and zeros;
        # the exponent weighs the mantissa, so both are compared. Below
        # 2^-100 the gradient (2^-e) passes float32's range, so the
        # smallest normal, subnormals, infinities and NaN (a step input:
        # a parameter must be finite) weigh it by their exponents alone.
        "frexp": [
            OwnCall(lambda x: (lambda m, e: m * (e.float() + 0.5))(*torch.frexp(x)),
                    torch.tensor([0.0, -0.0, 1.0, -1.0, 2.0, 0.5, 0.75, -3.0, 1 - 2.0 ** -24,
                                  2.0 ** 100 * (1 - 2.0 ** -24), 3e38,
                                  -3.4028234e38]).requires_grad_()),
            OwnCall(lambda x, y: torch.frexp(x)[0] * (torch.frexp(y)[1].float() *
                                                      torch.arange(1.0, 8.0)).sum(),
                    torch.tensor([0.3, -7.0, 1e20]).requires_grad_(),
                    args=(torch.tensor([float("inf"), float("-inf"), float("nan"), 1e-40,
                                        -(2.0 ** -126), 2.0 ** -149, 1.0]),))],
        # x & (2^k - 1) on integers (grid_sample's reflection parity),
        # negative ones too: the low bits as two's complement has them.
        "bitwise_and": [
            OwnCall(lambda x, k: x * (k & 3).float() + x * (k.to(torch.int8) & 1).float(),
                    torch.randn(7, generator=g).requires_grad_(),
                    args=(torch.tensor([-5, -1, 0, 3, 6, 13, -8]),))],
        # A write through a strided view (functionalized to
        # as_strided_scatter), eager's gradient: x's where nothing was
        # written, src's at its positions.
        "as_strided": [
            OwnCall(lambda x, s, size=size, stride=stride, at=at:
                    (lambda y: (y.as_strided(size, stride, at).copy_(s * 2.0), y)[1])(x * 1.0),
                    torch.randn(*shape, generator=g).requires_grad_(),
                    args=(torch.randn(*size, generator=g).requires_grad_(),))
            for shape, size, stride, at in (((5, 5), (2, 2), (1, 2), 1),
                                             ((16,), (2, 2, 2), (8, 1, 2), 1),
                                             ((3, 4), (3,), (5,), 0))],
        # Duplicate indices: the position keeps one writer's value, and
        # PyTorch's backward gives every writer the position's gradient
        # (grad.gather(d, index), grad.index_select(d, index)).
        "scatter": [
            SampleInput(torch.randn(3, 4, generator=g).requires_grad_(),
                        args=(1, torch.tensor([[0, 0, 2], [3, 1, 3], [1, 1, 1]]),
                              torch.randn(3, 3, generator=g).requires_grad_())),
            SampleInput(torch.randn(4, 2, generator=g).requires_grad_(),
                        args=(0, torch.tensor([[2, 0], [2, 0], [1, 0]]),
                              torch.randn(3, 2, generator=g).requires_grad_())),
            # One write a line (one-hot labels, label smoothing): index
            # short of x on the other axis, src wider than index, a value.
            SampleInput(torch.randn(4, 6, generator=g).requires_grad_(),
                        args=(1, torch.tensor([[5], [0], [-1]]),
                              torch.randn(3, 2, generator=g).requires_grad_())),
            SampleInput(torch.randn(4, 6, generator=g).requires_grad_(),
                        args=(1, torch.tensor([[2], [0], [5], [2]]), 0.9))],
        "index_copy": [
            SampleInput(torch.randn(4, 3, generator=g).requires_grad_(),
                        args=(0, torch.tensor([1, 3, 1]),
                              torch.randn(3, 3, generator=g).requires_grad_())),
            # No index: nothing written (a gather from the empty source
            # had stopped the run).
            SampleInput(torch.randn(4, 3, generator=g).requires_grad_(),
                        args=(0, torch.zeros(0, dtype=torch.long), torch.ones(0, 3)))],
        # Ties for the largest (self among them), whose gradient PyTorch
        # shares evenly; zero factors of a product.
        "scatter_reduce.amax": [
            SampleInput(torch.tensor([1., 5., 2., 0.]).requires_grad_(),
                        args=(0, torch.tensor([0, 0, 1, 2, 2, 2]),
                              torch.tensor([1., 1., 5., 3., 3., .5]).requires_grad_(), "amax"),
                        kwargs={"include_self": include})
            for include in (True, False)],
        "scatter_reduce.prod": [
            SampleInput(torch.tensor([2., 0., 3., 4.]).requires_grad_(),
                        args=(0, torch.tensor([0, 0, 1, 2, 2]),
                              torch.tensor([0., 4., 5., 0., 0.]).requires_grad_(), "prod"))],
        # 3-D pooling (2-D pools of the depth slices, then the depth
        # windows): padding cut by ceil_mode, averages without the padding
        # or over a fixed divisor; maxima tied across the depth (repeated
        # frames), where the gradient goes to the first.
        "nn.functional.avg_pool3d": [
            SampleInput(cube.clone().reshape(1, 4, 5, 6).requires_grad_(),
                        args=((3, 2, 3), (2, 2, 2), (1, 1, 1)),
                        kwargs={"ceil_mode": True, "count_include_pad": False}),
            SampleInput(cube.clone().reshape(2, 2, 5, 6).unsqueeze(0).requires_grad_(),
                        args=((2, 3, 2), (1, 2, 2), (1, 0, 1)),
                        kwargs={"ceil_mode": True, "divisor_override": 5}),
        ],
        "nn.functional.max_pool3d": [
            SampleInput(cube[:1].clone().reshape(1, 1, 1, 5, 6).repeat(1, 2, 4, 1, 1)
                        .requires_grad_(), args=((2, 2, 2), (1, 2, 2), (1, 0, 0))),
        ],
        # 3-D convolutions (a 2-D one over the depth folded in): strides,
        # padding, dilation, groups, no bias; torch 2.x's op_db has its own.
        "nn.functional.conv3d": [
            OwnCall(torch.nn.functional.conv3d, torch.randn(2, 4, 5, 6, 7, generator=g).requires_grad_(),
                    args=(torch.randn(6, 2, 3, 2, 3, generator=g).requires_grad_(),
                          torch.randn(6, generator=g).requires_grad_()),
                    kwargs={"stride": (2, 1, 2), "padding": (1, 0, 1), "dilation": (1, 2, 1),
                            "groups": 2}),
            OwnCall(torch.nn.functional.conv3d, torch.randn(1, 3, 4, 5, 5, generator=g).requires_grad_(),
                    args=(torch.randn(4, 3, 1, 3, 3, generator=g).requires_grad_(),)),
            OwnCall(torch.nn.functional.conv3d, torch.randn(3, 4, 4, 4, generator=g).requires_grad_(),
                    args=(torch.randn(2, 3, 3, 1, 1, generator=g).requires_grad_(),),
                    kwargs={"padding": "same"}),
        ],
        # Volumes (aten_decompositions.grid_sampler_3d): trilinear and
        # nearest, every padding, both corner conventions, a grid reaching
        # past the edges (padding read, reflected more than once), both
        # gradients.
        "nn.functional.grid_sample": [
            SampleInput(torch.randn(2, 3, 4, 5, 6, generator=g).requires_grad_(),
                        args=((torch.rand(2, 3, 2, 4, 3, generator=g) * 4.4 - 2.2)
                              .requires_grad_(),),
                        kwargs={"mode": mode, "padding_mode": padding,
                                "align_corners": align})
            for mode, padding, align in (
                ("bilinear", "zeros", False), ("bilinear", "border", True),
                ("bilinear", "reflection", False), ("bilinear", "reflection", True),
                ("nearest", "zeros", True), ("nearest", "reflection", False))] + [
            # Points on the edge pixels' centres, exactly: PyTorch gives
            # the grid no gradient where its border clip holds.
            SampleInput(torch.randn(1, 2, 3, 4, 5, generator=g).requires_grad_(),
                        args=((torch.rand(1, 2, 3, 2, 3, generator=g) * 4 - 2).clamp(-1, 1)
                              .requires_grad_(),),
                        kwargs={"padding_mode": "border", "align_corners": True})],
        # A mask whose running count runs past the matrix's bound.
        "masked_scatter": [
            SampleInput(long.clone().requires_grad_(),
                        args=(torch.rand(2, 3000, generator=g) > 0.6,
                              torch.randn(3000, generator=g).requires_grad_())),
        ],
        # Indices from the data: apart (the written block comes first in the
        # values), after a sliced axis, broadcast together, negative;
        # duplicates, added (accumulate) or written (the last writer stays,
        # and every writer gets the gradient at its position, as PyTorch's
        # backward gives it); a mask over two axes with a row for every
        # selected element, and a mask added to.
        "index_put": [
            put_sample(cube, (torch.tensor([1, -2, 3]), None, torch.tensor([3, 0, -1])),
                       torch.randn(3, 5, generator=g)),
            put_sample(cube, (None, torch.tensor([[0], [-1]]), torch.tensor([2, 4, 0])),
                       torch.randn(4, 2, 3, generator=g)),
            put_sample(cube, (torch.tensor([1, -3, 1, 2]),), torch.randn(4, 5, 6, generator=g),
                       accumulate=True),
            put_sample(cube, (torch.tensor([2, 0, 2]),), torch.randn(3, 1, 6, generator=g)),
            put_sample(cube, (rows,), torch.randn(6, generator=g)),
            put_sample(cube, (None, torch.randn(5, 6, generator=g) > 0), torch.randn(1, generator=g),
                       accumulate=True),
            # 1100 writes (many repeated) into 4096 rows: past the 2^22
            # pairs a comparison of every row with every write was bounded
            # at (and refused beyond) before the last writer was sorted.
            put_sample(torch.randn(4096, 2, generator=g),
                       (torch.randint(-4096, 4096, (1100,), generator=g) // 5,),
                       torch.randn(1100, 2, generator=g)),
        ],
        # Several index tensors from the data: adjacent after a sliced axis
        # (the indexed block stays in place), apart (it moves to the front),
        # negative positions, indices that broadcast.
        "__getitem__": [
            SampleInput(cube.clone().requires_grad_(),
                        args=((slice(None), torch.tensor([0, -1, 2]), torch.tensor([[1], [-6]])),)),
            SampleInput(cube.clone().requires_grad_(),
                        args=((torch.tensor([1, -2, 1]), slice(None), torch.tensor([3, 0, 5])),)),
            SampleInput(cube.clone().requires_grad_(), args=((slice(None), torch.tensor([-1, 2])),)),
        ],
        # A padding index whose row is not zero (a model's own init, a
        # checkpoint): its lookups return the row, and it gets no gradient.
        "nn.functional.embedding": [
            SampleInput(torch.randn(10, 5, generator=g).requires_grad_(),
                        args=(torch.tensor([[2, 0, 7], [2, 2, 9]]),), kwargs={"padding_idx": 2}),
        ],
        # Each row's targets end at its first -1 (what follows is ignored);
        # op_db's targets hold none.
        "nn.functional.multilabel_margin_loss": [
            SampleInput(scores.clone().requires_grad_(),
                        args=(torch.tensor([[3, 0, -1, 1, 4], [1, -1, 2, 2, 0],
                                            [-1, 2, 3, 4, 0], [0, 1, 2, 3, 4]]),)),
            SampleInput(scores[0].clone().requires_grad_(),
                        args=(torch.tensor([2, 4, -1, 0, 1]),), kwargs={"reduction": "none"}),
        ],
        # A class weight, and every reduction.
        "nn.functional.multi_margin_loss": [
            SampleInput(scores.clone().requires_grad_(), args=(torch.tensor([1, 0, 4, 2]),),
                        kwargs={"p": 2, "margin": 0.7, "weight": weight,
                                "reduction": r})
            for r in ("none", "sum")],
    }


OWN_SAMPLES_ONLY = object()  # the entry of a name this op_db lacks


def out_of_scope_reason(name):
    # An entry matches by its name or by the name less its variant(s)
    # (nn.functional.feature_alpha_dropout.with_train).
    parts = name.split(".")
    names = {".".join(parts[:i]) for i in range(1, len(parts) + 1)}
    for key, reason in OUT_OF_SCOPE:
        if key.endswith("."):
            if name.startswith(key):
                return reason
        elif names & set(key.split()):
            return reason
    return None


def full_name(entry):
    return entry.name + ("." + entry.variant_test_name if entry.variant_test_name else "")


class Sample(nn.Module):
    """An op_db sample as a module: its float tensors are parameters, its
    integer and boolean tensors step inputs; loss = Σ (output_i · w_i)."""

    def __init__(self, entry, sample, seed=0):
        super().__init__()
        self.fn = getattr(sample, "fn", None) or entry.op  # an extra sample's own call
        leaves, self.spec = tree_flatten((sample.input, sample.args, sample.kwargs))
        self.kinds, params, self.data = [], [], {}
        for leaf in leaves:
            # A float tensor holding NaN or inf is a step input (fsdp-run
            # refuses a non-finite trained parameter, by design), as is one
            # an extra sample marks (an argument PyTorch does not
            # differentiate).
            if isinstance(leaf, torch.Tensor) and leaf.is_floating_point() and \
                    bool(torch.isfinite(leaf).all()) and not getattr(leaf, "step_input", False):
                self.kinds.append(("param", len(params)))
                params.append(nn.Parameter(leaf.detach().clone().float()))
            elif isinstance(leaf, torch.Tensor):
                name = f"in{len(self.data)}"
                self.kinds.append(("input", name))
                self.data[name] = leaf.detach().clone()
            else:
                self.kinds.append(("value", leaf))
        self.ps = nn.ParameterList(params)
        # The loss's weights, one per float output: drawn here, once (a
        # constant of the traced step).
        with torch.no_grad():
            outs = self.outputs(**self.data)
        g = torch.Generator().manual_seed(seed)
        self.weights = [torch.rand(tuple(o.shape), generator=g) + 0.5 for o in outs]

    def outputs(self, **inputs):
        leaves = []
        for kind, v in self.kinds:
            leaves.append(self.ps[v] if kind == "param" else inputs[v] if kind == "input" else v)
        inp, args, kwargs = tree_unflatten(leaves, self.spec)
        out = self.fn(inp, *args, **kwargs)
        return [o for o in tree_flatten(out)[0]
                if isinstance(o, torch.Tensor) and o.is_floating_point()]

    def forward(self, **inputs):
        loss = None
        for o, w in zip(self.outputs(**inputs), self.weights):
            term = (o * w.to(o.dtype)).sum()
            loss = term if loss is None else loss + term
        return loss


def reference_grads(entry, sample, dtype):
    m = Sample(entry, sample).to(dtype)
    m.weights = [w.to(dtype) for w in m.weights]
    loss = m(**{k: v.to(dtype) if v.is_floating_point() else v for k, v in m.data.items()})
    if loss is None or not loss.requires_grad:
        return None
    if not torch.isfinite(loss):
        raise ValueError("PyTorch's own loss is not finite")
    loss.backward()
    return [None if p.grad is None else p.grad.double().numpy() for p in m.ps], float(loss)


def relative(g, ref):
    # Relative to the largest gradient, or absolute below 1: float noise
    # on a gradient that is zero (x / |x|'s) is not a relative error of 1.
    scale = max(float(np.abs(ref).max()) if ref.size else 0.0, 1.0)
    return float(np.abs(g - ref).max()) / scale if ref.size else 0.0


FRONTEND = "auto"  # --frontend: how fsdp_trace captures (export, make_fx)


def run_sample(entry, sample, tools, base):
    """(verdict, detail) for one sample."""
    if float(sample.kwargs.get("dropout_p", 0.0) or 0.0) > 0:
        # The plan draws its own mask (fsdp.dropout); PyTorch's generator
        # draws another, so no gradient compares. attention_dropout.py and
        # dropout.py test what the plan draws.
        return "skip", "draws a dropout mask (tested by attention_dropout.py, dropout.py)"
    try:
        (g64, loss64), (g32, loss32) = (reference_grads(entry, sample, torch.float64) or
                                        (None, None),
                                        reference_grads(entry, sample, torch.float32) or
                                        (None, None))
    except Exception as e:  # PyTorch itself refuses the sample at f64
        return "skip", f"PyTorch: {type(e).__name__}: {str(e).splitlines()[0][:120]}"
    if g64 is None or all(g is None for g in g64):
        return "skip", "no float output depends on a float input"
    module = Sample(entry, sample)
    try:
        traced = fsdp_trace.trace(module, dict(module.data), frontend=FRONTEND)
        traced.save(base + ".mlir")
    except fsdp_trace.TraceError as e:
        why = str(e).strip().splitlines()[-1 if "ATen op" in str(e) else 0][:160]
        if "shape depends on the data" in why:
            # Out of scope as the entries of OUT_OF_SCOPE's data-dependent
            # shapes are (x[mask] with a mask from the data): refused, with
            # that reason, by design.
            return "skip", why
        return "tracer", why
    except Exception as e:
        # Not a refusal: the tracer itself broke (or PyTorch under it), which
        # no pass rate may absorb.
        return "CRASH tracer", f"{type(e).__name__}: {str(e).splitlines()[0][:140] if str(e) else ''}"
    np.savez(base + ".npz", **{k: v.numpy() for k, v in module.data.items()})
    r = bounded.run([tools[0], base + ".mlir", "-o", base + ".plan"],
                    capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        why = [line for line in r.stderr.splitlines() if "error" in line][:1]
        return ("fsdp-opt" if r.returncode == 1 else "CRASH fsdp-opt",
                (why[0] if why else r.stderr[-160:]).strip()[:160])
    argv = [tools[1], base + ".plan", "--steps", "1", "--quiet", "--log", base + ".log",
            "--dump-grads", base + ".grads.safetensors"]
    if module.data:
        argv += ["--data", base + ".npz"]
    r = bounded.run(argv, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        return ("fsdp-run" if r.returncode == 1 else "CRASH fsdp-run",
                r.stderr.strip()[-160:])
    # The loss too: it is linear in the outputs, so a wrong value of the
    # last op (a zeroed embedding row) leaves every gradient as PyTorch's.
    with open(base + ".log") as f:
        loss = json.loads(f.readline())["loss"]
    scale = max(abs(loss64), 1.0)
    if abs(loss - loss64) / scale > max(TOLERANCE_FACTOR * abs(loss32 - loss64) / scale,
                                        FLOOR):
        return "wrong", f"loss {loss!r}, PyTorch float64 {loss64!r} (float32 {loss32!r})"
    ours = read_safetensors(base + ".grads.safetensors")
    worst, worst32 = 0.0, 0.0
    for i, (a, b) in enumerate(zip(g64, g32)):
        if a is None:
            continue
        key = f"ps.{i}"
        if key not in ours:
            if a.size == 0 or np.abs(a).max() == 0:
                continue
            return "wrong", f"no gradient for {key}"
        g = np.asarray(ours[key], np.float64).reshape(a.shape)
        if not np.all(np.isfinite(g)) and np.all(np.isfinite(a)):
            return "wrong", f"{key}: non-finite gradient"
        worst = max(worst, relative(g, a))
        worst32 = max(worst32, relative(b, a))
    if worst <= max(TOLERANCE_FACTOR * worst32, FLOOR):
        via = f" [make_fx: {traced.export_error}]"[:120] if traced.export_error else ""
        return "ok", f"{worst:.1e} (torch f32 {worst32:.1e}){via}"
    return "wrong", f"gradient {worst:.2e} from float64, torch f32 {worst32:.1e}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fsdp-opt", required=True)
    ap.add_argument("--fsdp-run", required=True)
    ap.add_argument("--samples", type=int, default=4, help="op_db samples tried per entry (and then every one of _extra_samples)")
    ap.add_argument("--only", help="comma-separated entry names")
    ap.add_argument("--family", help="only this family")
    ap.add_argument("--json", help="write every verdict here")
    ap.add_argument("--min-pass", type=float, default=0.0,
                    help="fail unless this fraction of in-scope entries passes")
    ap.add_argument("--min-tried", type=int, default=0,
                    help="fail unless at least this many entries ran a sample (not "
                         "skipped, not missing): a run where every entry skips has "
                         "checked nothing")
    ap.add_argument("--frontend", choices=fsdp_trace.capture_frontends(), default="auto",
                    help="how the tracer captures: torch.export (PyTorch 2.x), make_fx, "
                         "or auto (export where it can)")
    a = ap.parse_args()
    global FRONTEND
    FRONTEND = a.frontend
    print(f"PyTorch {torch.__version__}, frontend {a.frontend}", flush=True)
    from torch.testing._internal.common_methods_invocations import op_db
    entries = {full_name(e): e for e in op_db}
    tools = (a.fsdp_opt, a.fsdp_run)
    only = set(a.only.split(",")) if a.only else None
    results, table = {}, {}
    start = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        for family, names in FAMILIES.items():
            if a.family and family != a.family:
                continue
            for name in names:
                if only and name not in only:
                    continue
                entry = entries.get(name)
                extra = _extra_samples().get(name, [])
                if entry is None and extra and all(getattr(x, "fn", None) for x in extra):
                    # An entry this op_db lacks (conv3d before torch 2.x),
                    # tried on our samples alone, each with its own call.
                    entry = OWN_SAMPLES_ONLY
                if entry is None:
                    verdicts = [("missing", "not in this PyTorch's op_db")]
                else:
                    verdicts = []
                    torch.manual_seed(0)
                    # op_db's first --samples samples, and after them
                    # every one of ours (_extra_samples).
                    samples = [] if entry is OWN_SAMPLES_ONLY else \
                        list(entry.sample_inputs("cpu", torch.float32, requires_grad=True))
                    samples = samples[:a.samples] + extra
                    for k, sample in enumerate(samples):
                        base = os.path.join(tmp, f"{name}.{k}".replace("/", "_"))
                        verdicts.append(run_sample(entry, sample, tools, base))
                tried = [v for v in verdicts if v[0] != "skip"]
                bad = [v for v in tried if v[0] != "ok"]
                status = "missing" if entry is None else "skip" if not tried else \
                    "ok" if not bad else bad[0][0]
                detail = (bad[0][1] if bad else tried[0][1] if tried else
                          verdicts[0][1] if verdicts else "no samples")
                results[name] = {"family": family, "status": status, "detail": detail,
                                 "samples": [list(v) for v in verdicts]}
                print(f"{status:14s} {family:13s} {name:44s} {detail}", flush=True)
                row = table.setdefault(family, [0, 0])
                if status != "skip":
                    row[1] += 1
                    row[0] += status == "ok"
    total = [sum(r[0] for r in table.values()), sum(r[1] for r in table.values())]
    print(f"\n{'family':14s} passed")
    for family, (ok, n) in table.items():
        print(f"{family:14s} {ok}/{n}")
    print(f"{'all':14s} {total[0]}/{total[1]} in scope "
          f"({100.0 * total[0] / max(total[1], 1):.0f}%), {time.time() - start:.0f} s")
    out = sorted({full_name(e): out_of_scope_reason(full_name(e)) for e in op_db
                  if out_of_scope_reason(full_name(e))}.items())
    reasons = {}
    for name, why in out:
        reasons.setdefault(why, []).append(name)
    print("\nout of scope:")
    for why, names in reasons.items():
        print(f"  {why}: {', '.join(names)}")
    # A crash or a wrong gradient fails the suite whatever the pass rate: a
    # refusal says so; a wrong result with exit 0 trains something else.
    crashes = [n for n, r in results.items()
               if r["status"].startswith("CRASH") or r["status"] == "wrong"]
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"results": results, "table": table, "out_of_scope": reasons}, f, indent=1)
    if crashes:
        print("crashed or wrong: " + ", ".join(crashes))
        return 1
    tried = sum(r["status"] not in ("skip", "missing") for r in results.values())
    if tried < a.min_tried:
        print(f"FAILED: {tried} entries ran a sample, fewer than the {a.min_tried} "
              f"--min-tried asks")
        return 1
    if total[1] and total[0] / total[1] < a.min_pass:
        print(f"below the required {a.min_pass:.0%}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
