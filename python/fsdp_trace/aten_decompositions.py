"""ATen ops PyTorch gives no decomposition of, written as other ATen ops
(as torch._decomp's are), for make_fx and torch.export to trace through:
capture._decompositions adds them to PyTorch's own. What they are made of
is lowered by lower.py and decompose/; their gradients are autograd's of
those ops, matched to PyTorch's own backward where the two differ."""
import torch

aten = torch.ops.aten


def _unnormalize(coord, size, align_corners):
    """A grid coordinate in [-1, 1] as a position in pixels: -1 and 1 are
    the centres of the edge pixels with align_corners, their outer edges
    without."""
    if align_corners:
        return (coord + 1) * ((size - 1) / 2)
    return ((coord + 1) * size - 1) / 2


def _clip(x, size):
    """x in [0, size - 1]; the gradient 0 where clipped, at the edges too
    (PyTorch's clip_coordinates_set_grad)."""
    inside = (x > 0) & (x < size - 1)
    edge = torch.where(x <= 0, torch.zeros_like(x), torch.full_like(x, size - 1))
    return torch.where(inside, x, edge)


def _reflect(x, twice_low, twice_high):
    """x reflected into [low, high] by its edges, as often as it takes
    (PyTorch's reflect_coordinates): the distance from low folded by the
    span, mirrored on odd folds; the gradient's sign flips with it."""
    if twice_low == twice_high:
        return torch.zeros_like(x)
    low = twice_low / 2
    span = (twice_high - twice_low) / 2
    x = torch.abs(x - low)
    folds = torch.floor(x / span)
    extra = x - folds * span
    odd = (folds - 2 * torch.floor(folds / 2)) > 0.5
    return torch.where(odd, span - extra + low, extra + low)


def _source(coord, size, padding_mode, align_corners):
    x = _unnormalize(coord, size, align_corners)
    if padding_mode == 1:  # border
        return _clip(x, size)
    if padding_mode == 2:  # reflection
        if align_corners:
            x = _reflect(x, 0, 2 * (size - 1))
        else:
            x = _reflect(x, -1, 2 * size - 1)
        return _clip(x, size)
    return x


def grid_sampler_3d(input, grid, interpolation_mode, padding_mode, align_corners):
    """F.grid_sample on volumes: input [N, C, D, H, W] read at grid [N, D',
    H', W', 3] (x, y, z in [-1, 1]: W, H, D), trilinear (mode 0) or nearest
    (mode 1, ties to even as nearbyint), zeros, border or reflection
    padding. Each corner is one gather of the flattened volume; a corner
    outside it reads 0 (zeros padding)."""
    if interpolation_mode not in (0, 1):
        raise RuntimeError("grid_sampler_3d: bicubic interpolation is for 4-D input only")
    n, c, d, h, w = input.shape
    out_spatial = grid.shape[1:4]
    points = out_spatial[0] * out_spatial[1] * out_spatial[2]
    grid = grid.reshape(n, points, 3)
    x = _source(grid[..., 0], w, padding_mode, align_corners)
    y = _source(grid[..., 1], h, padding_mode, align_corners)
    z = _source(grid[..., 2], d, padding_mode, align_corners)
    volume = input.reshape(n, c, d * h * w)

    def read(zi, yi, xi):
        """[N, C, points]: the volume at integer positions (float tensors),
        0 outside it."""
        inside = (xi >= 0) & (xi <= w - 1) & (yi >= 0) & (yi <= h - 1) & (zi >= 0) & (zi <= d - 1)
        xc = torch.clamp(xi, 0, w - 1).to(torch.int64)
        yc = torch.clamp(yi, 0, h - 1).to(torch.int64)
        zc = torch.clamp(zi, 0, d - 1).to(torch.int64)
        index = ((zc * h + yc) * w + xc).unsqueeze(1).expand(n, c, points)
        values = torch.gather(volume, 2, index)
        return torch.where(inside.unsqueeze(1), values, torch.zeros_like(values))

    if interpolation_mode == 1:
        out = read(torch.round(z), torch.round(y), torch.round(x))
    else:
        x0, y0, z0 = torch.floor(x), torch.floor(y), torch.floor(z)
        fx, fy, fz = x - x0, y - y0, z - z0
        out = None
        for dz, wz in ((0, 1 - fz), (1, fz)):
            for dy, wy in ((0, 1 - fy), (1, fy)):
                for dx, wx in ((0, 1 - fx), (1, fx)):
                    term = read(z0 + dz, y0 + dy, x0 + dx) * (wz * wy * wx).unsqueeze(1)
                    out = term if out is None else out + term
    return out.reshape(n, c, *out_spatial)


def frexp(x):
    """x = mantissa * 2**exponent, |mantissa| in [0.5, 1) (C's frexp); zero,
    inf and NaN are their own mantissa with exponent 0. The exponent is
    log2's, floored, then the mantissa moved into [0.5, 1) where log2
    rounded across a power of two; 2**-e, a pow (exact at integers), is
    applied in two halves so that a subnormal's (e down to -148) does not
    overflow. The mantissa's gradient is 2**-e, as PyTorch's; the exponent
    takes none."""
    ax = torch.abs(x)
    normal = (ax > 0) & (ax < float("inf"))
    e = torch.floor(torch.log2(torch.where(normal, ax, torch.ones_like(ax)))) + 1
    half = torch.floor(e * 0.5)
    m = x * torch.pow(2.0, -half) * torch.pow(2.0, half - e)
    am = torch.abs(m)
    up, down = am >= 1, (am < 0.5) & normal
    m = torch.where(up, m * 0.5, torch.where(down, m * 2, m))
    e = e + up.to(e.dtype) - down.to(e.dtype)
    return (torch.where(normal, m, x),
            torch.where(normal, e, torch.zeros_like(e)).to(torch.int32))


def mode(x, dim=-1, keepdim=False):
    """The most frequent value along `dim` and the index of its last
    occurrence, the smallest such value where several are as frequent (as
    PyTorch's CPU kernel gives them): each element's count from an
    all-pairs comparison ([..., n, n], no shape that depends on the data).
    The value is gathered at the index, so its gradient goes there, as
    PyTorch's does."""
    if x.dim() == 0:
        return x.clone(), torch.zeros((), dtype=torch.long)
    d = dim % x.dim()
    y = x.movedim(d, -1)
    n = y.shape[-1]
    count = (y.unsqueeze(-1) == y.unsqueeze(-2)).sum(-1)
    top = count == count.amax(-1, keepdim=True)
    value = torch.where(top, y, torch.full_like(y, float("inf"))).amin(-1, keepdim=True)
    position = torch.arange(n, device=x.device).expand(y.shape)
    index = torch.where(y == value, position, torch.full_like(position, -1)).amax(-1, keepdim=True)
    values = torch.gather(y, -1, index)
    if keepdim:
        return values.movedim(-1, d), index.movedim(-1, d)
    return values.squeeze(-1), index.squeeze(-1)


TABLE = {aten.grid_sampler_3d.default: grid_sampler_3d,
         aten.frexp.Tensor: frexp,
         aten.mode.default: mode}
