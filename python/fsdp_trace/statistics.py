"""cov, corrcoef, quantile and nanquantile traced without reading values.

PyTorch's own implementations (ATen's Correlation.cpp and Sorting.cpp)
check the data with `.item()` as they run: cov that its weights are not
negative and do not sum to zero, and whether its degrees of freedom are
positive (to warn and clamp them); quantile that every q lies in [0, 1].
No plan has those values before it runs, so the capture stopped at the
check. While a model is traced, `StatisticsAsOps` answers these functions
with the same computation written from ops the tracer lowers: the
degrees of freedom clamped at zero with a `where`, the quantile's ranks
and NaN rules as tensors. The checks themselves are not run (fsdp-run
has no data checks), and a note on stderr says so.

Ranks are computed in the input's dtype where PyTorch computes them in
float64 (a plan holds no float64 tensor): a rank a rounding away from an
integer may fall on the other side of it, which moves a linear
interpolation by a rounding and picks the neighbouring element for
`lower`, `higher` and `nearest`.
"""
import sys

import torch


def cov(input, correction=1, fweights=None, aweights=None):
    """torch.cov: rows are variables, columns observations."""
    x = input.reshape(1, -1) if input.dim() < 2 else input
    n = x.shape[1]
    w = fweights
    if aweights is not None:
        w = aweights if w is None else w * aweights
    w_sum = n if w is None else w.sum()
    mean = (x if w is None else x * w).sum(1) / w_sum
    if w is None:
        dof = torch.tensor(float(max(n - correction, 0)))
    elif correction == 0:
        dof = w_sum
    elif aweights is None:
        dof = w_sum - correction
    elif fweights is None and n == 1 and correction == 1:
        dof = torch.tensor(0.0)  # PyTorch's exact answer for this case
    else:
        dof = w_sum - correction * (w * aweights).sum() / w_sum
    # Non-positive degrees of freedom divide by zero, as PyTorch's clamp.
    dof = torch.where(dof > 0, dof, torch.zeros_like(dof))
    if n == 1 and (fweights is None) != (aweights is None):
        centred = torch.zeros_like(x, dtype=mean.dtype)  # x equals its mean
    else:
        centred = x - mean.unsqueeze(1)
    product = centred @ (centred if w is None else centred * w).t()
    return (product / dof).squeeze()


def corrcoef(input):
    """torch.corrcoef: cov normalised by the variables' deviations,
    clipped to [-1, 1]."""
    c = cov(input)
    if c.dim() == 0:
        return c / c
    deviation = c.diagonal().sqrt()
    c = c / deviation.reshape(-1, 1)
    c = c / deviation.reshape(1, -1)
    return c.clip(-1, 1)


def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear",
             ignore_nan=False):
    """torch.quantile (ignore_nan: nanquantile): the q-th quantiles along
    `dim` (None: of every element), q a number or a 0-d or 1-d tensor."""
    if interpolation not in ("linear", "lower", "higher", "midpoint", "nearest"):
        raise ValueError(f"quantile() interpolation must be one of linear, lower, "
                         f"higher, midpoint or nearest, got {interpolation!r}")
    q = q if isinstance(q, torch.Tensor) else torch.tensor(q, dtype=input.dtype)
    qs = q.reshape(-1).to(input.dtype)
    if dim is None:
        rows = input.reshape(-1)
        kept = [1] * input.dim() if keepdim else []
    else:
        d = dim % max(input.dim(), 1)
        rows = input.reshape(1) if input.dim() == 0 else input.movedim(d, -1)
        kept = list(input.shape)
        if input.dim() > 0:
            if keepdim:
                kept[d] = 1
            else:
                del kept[d]
    rows = rows.unsqueeze(-2)  # [..., 1, n]: one row a quantile below
    n = rows.shape[-1]
    nan = rows.isnan()
    if ignore_nan:
        # Over the row's values that are not NaN; a NaN sorts past them as
        # +inf, and a row of NaN alone stays NaN.
        count = (~nan).sum(-1, keepdim=True)
        ranks = (qs.unsqueeze(-1) * (count - 1).to(input.dtype)).clamp(min=0)
        rows = rows.masked_fill(nan & (count > 0), float("inf"))
    else:
        # A NaN anywhere in the row makes each of its quantiles NaN.
        has_nan = nan.any(-1, keepdim=True)
        rows = rows.masked_fill(has_nan, float("nan"))
        ranks = torch.where(has_nan, torch.tensor(float(n - 1), dtype=input.dtype),
                            qs.unsqueeze(-1) * (n - 1))
    if interpolation == "lower":
        ranks = ranks.floor()
    elif interpolation == "higher":
        ranks = ranks.ceil()
    elif interpolation == "nearest":
        ranks = ranks.round()
    ranks = ranks.expand(*rows.shape[:-2], qs.numel(), 1)
    ordered = rows.sort(-1).values.expand(*rows.shape[:-2], qs.numel(), n)
    below = ranks.long()
    values = ordered.gather(-1, below)
    if interpolation in ("linear", "midpoint"):
        weight = torch.full_like(ranks, 0.5) if interpolation == "midpoint" \
            else ranks - below.to(input.dtype)
        values = torch.lerp(values, ordered.gather(-1, ranks.ceil().long()), weight)
    values = values.squeeze(-1).movedim(-1, 0)  # [Q, ...]
    return values.reshape(kept) if q.dim() == 0 else values.reshape([qs.numel()] + kept)


class StatisticsAsOps(torch.overrides.TorchFunctionMode):
    """While tracing: torch.cov, corrcoef, quantile and nanquantile (and
    their Tensor methods) answered by the functions above."""

    def __init__(self):
        super().__init__()
        self.unrun = set()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in (torch.cov, torch.Tensor.cov):
            if kwargs.get("fweights") is not None or kwargs.get("aweights") is not None:
                self.unrun.add("cov's checks of its weights")
            return cov(*args, **kwargs)
        if func in (torch.corrcoef, torch.Tensor.corrcoef):
            return corrcoef(*args, **kwargs)
        if func in (torch.quantile, torch.Tensor.quantile,
                    torch.nanquantile, torch.Tensor.nanquantile):
            self.unrun.add("quantile's check that q lies in [0, 1]")
            nan = func in (torch.nanquantile, torch.Tensor.nanquantile)
            return quantile(*args, **kwargs, ignore_nan=nan)
        return func(*args, **kwargs)

    def __exit__(self, *exc):
        if self.unrun:
            print(f"fsdp_trace: note: the plan does not run {'; '.join(sorted(self.unrun))} "
                  f"(fsdp-run has no data checks)", file=sys.stderr)
        return super().__exit__(*exc)
