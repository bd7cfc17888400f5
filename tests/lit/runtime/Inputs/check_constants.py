"""Checks a bf16 plan's constants against the f32 plan of the same model:
each distinct value is stored once (the RoPE tables every layer casts to
bf16 are two entries, not two per layer), and a large bf16 constant's
base64 bits are its f32 value rounded to nearest-even."""
import base64
import collections
import json
import sys

import numpy as np

f32, bf16 = (json.load(open(p))["constants"] for p in sys.argv[1:3])


def table(c, dtype):
    return np.frombuffer(base64.b64decode(c["base64"]), dtype)


def to_bf16_bits(x):
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


big16 = [c for c in bf16 if "base64" in c and c["dtype"] == "bf16"]
big32 = [c for c in f32 if "base64" in c and c["dtype"] == "f32"]
shapes = collections.Counter(tuple(c["shape"]) for c in big16)
print("bf16 tables", sorted(shapes.items()))
wanted = sorted(to_bf16_bits(table(c, np.float32)).tobytes() for c in big32)
got = sorted(table(c, np.uint16).tobytes() for c in big16)
print("rounded from f32:", got == wanted)
