"""Writing the fsdp dialect as MLIR text: types, attributes, constants, ops.

Ops are written in MLIR's generic form (`"fsdp.add"(%a, %b) : (...) -> ...`,
inherent attributes as properties `<{...}>`), which every op parses without
this module knowing its custom syntax; `fsdp-opt` prints them back in the
custom form.
"""
import math
import struct

import torch

ELEMENT_TYPES = {
    torch.float32: "f32",
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.int64: "i64",
    torch.bool: "i1",
}


# Integers narrower than 64 bits (int32 position ids, uint8 pixels) are
# computed as int64, the one integer type every backend runs: the same
# values (only an overflow past 2^31 would differ, where PyTorch's int32
# wraps).
WIDENED = {torch.int32: torch.int64, torch.int16: torch.int64, torch.int8: torch.int64,
           torch.uint8: torch.int64}


def canonical(dtype):
    return WIDENED.get(dtype, dtype)


class TraceError(Exception):
    """A model the tracer cannot write (the message says why and where)."""


def element_type(dtype):
    dtype = canonical(dtype)
    if dtype not in ELEMENT_TYPES:
        raise TraceError(f"dtype {dtype} has no fsdp element type "
                         f"(supported: {', '.join(str(d) for d in ELEMENT_TYPES)})")
    return ELEMENT_TYPES[dtype]


def tensor_type(shape, dtype):
    dims = "".join(f"{int(d)}x" for d in shape)
    return f"tensor<{dims}{element_type(dtype)}>"


def string(s):
    """An MLIR string literal."""
    out = []
    for ch in str(s):
        if ch in '"\\' or not (32 <= ord(ch) < 127):
            out.extend(f"\\{b:02X}" for b in ch.encode("utf-8"))
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def symbol(name):
    return "@" + string(name)


def f32_attr(x):
    x = float(x)
    if math.isfinite(x):
        return "%.9e : f32" % x
    return "0x%08X : f32" % struct.unpack("<I", struct.pack("<f", x))[0]


def i64_attr(n):
    return f"{int(n)} : i64"


def bool_attr(b):
    return "true" if b else "false"


def i64_array(values):
    return "array<i64" + (": " + ", ".join(str(int(v)) for v in values) if len(values) else "") + ">"


def dense(tensor):
    """A DenseElementsAttr literal for a CPU tensor: hex of its little-endian
    bytes (one element's when every element is equal), bits packed for i1."""
    t = tensor.detach().cpu().contiguous()
    t = t.to(canonical(t.dtype))
    flat = t.reshape(-1)
    n = flat.numel()
    # (A NaN never equals itself: a tensor holding one is written whole.)
    splat = n > 0 and bool((flat == flat[0]).all())
    if splat:
        flat = flat[:1]
    if t.dtype == torch.bool and splat:
        # MLIR reads a one-byte i1 buffer as a splat only when it is 0x00 or
        # 0xFF (0x01 is refused as too short): the literal says it plainly.
        return f'dense<{"true" if bool(flat[0]) else "false"}> : {tensor_type(t.shape, t.dtype)}'
    if t.dtype == torch.bool:
        bits = flat.to(torch.uint8).tolist()
        data = bytearray((len(bits) + 7) // 8)
        for i, b in enumerate(bits):
            if b:
                data[i // 8] |= 1 << (i % 8)
        raw = bytes(data)
    elif t.dtype == torch.bfloat16:
        raw = flat.view(torch.int16).numpy().astype("<i2").tobytes()
    else:
        raw = flat.numpy().astype(flat.numpy().dtype.newbyteorder("<")).tobytes()
    return f'dense<"0x{raw.hex().upper()}"> : {tensor_type(t.shape, t.dtype)}'


class Value:
    """An SSA value of the function being written."""

    def __init__(self, name, shape, dtype):
        self.name, self.shape = name, tuple(int(d) for d in shape)
        self.dtype = canonical(dtype)

    @property
    def type(self):
        return tensor_type(self.shape, self.dtype)

    @property
    def rank(self):
        return len(self.shape)

    @property
    def numel(self):
        return math.prod(self.shape)

    def __repr__(self):
        return f"{self.name}: {self.type}"


class Writer:
    """Accumulates the body of @forward, one op per line."""

    def __init__(self):
        self.lines = []
        self.counter = 0

    def op(self, name, operands, results, props=None, loc=None):
        """Writes `name` over `operands` (Values) giving results of
        (shape, dtype) each; returns their Values."""
        base = f"%{self.counter}"
        self.counter += 1
        if len(results) == 1:
            outs = [Value(base, *results[0])]
            lhs = base + " = "
        elif results:
            outs = [Value(f"{base}#{i}", *r) for i, r in enumerate(results)]
            lhs = f"{base}:{len(results)} = "
        else:
            outs, lhs = [], ""
        prop = ""
        if props:
            prop = " <{" + ", ".join(f"{k} = {v}" for k, v in sorted(props.items())) + "}>"
        types = ", ".join(v.type for v in operands)
        rtypes = ", ".join(v.type for v in outs)
        if len(outs) != 1:
            rtypes = f"({rtypes})"
        text = (f'    {lhs}"{name}"({", ".join(v.name for v in operands)}){prop} '
                f': ({types}) -> {rtypes}')
        if loc:
            text += f" loc({string(loc)})"
        self.lines.append(text)
        return outs

    def constant(self, tensor, loc=None):
        t = tensor.detach().cpu()
        return self.op("fsdp.constant", [], [(t.shape, t.dtype)],
                       {"value": dense(t)}, loc)[0]

    def splat(self, value, shape, dtype, loc=None):
        """A constant of `shape` whose every element is `value`."""
        dtype = canonical(dtype)
        one = dense(torch.full((1,), value, dtype=dtype)).rsplit(" : ", 1)[0]
        return self.op("fsdp.constant", [], [(shape, dtype)],
                       {"value": f"{one} : {tensor_type(shape, dtype)}"}, loc)[0]
