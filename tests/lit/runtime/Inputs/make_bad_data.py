"""Writes crafted data files into DIR: .npz archives whose .npy headers lie
about their shapes or are cut short, and an llm.c token file whose header
claims far more tokens than it holds."""
import io
import struct
import sys
import zipfile

import numpy as np

out = sys.argv[1]


def npy(header, payload, major=1):
    h = header.encode()
    h += b" " * (-(len(h) + (10 if major == 1 else 12) + 1) % 64) + b"\n"
    size = struct.pack("<H", len(h)) if major == 1 else struct.pack("<I", len(h))
    return b"\x93NUMPY" + bytes([major, 0]) + size + h + payload


def npz(name, arrays):
    with zipfile.ZipFile(f"{out}/{name}.npz", "w", zipfile.ZIP_STORED) as z:
        for key, blob in arrays.items():
            z.writestr(key + ".npy", blob)


good_y = io.BytesIO()
np.save(good_y, np.zeros((2, 32), np.float32))
y = good_y.getvalue()
# (2^56 + 1) x 64 float32 wraps to 256 bytes in 64-bit arithmetic.
npz("wrap", {"x": npy("{'descr': '<f4', 'fortran_order': False, "
                      f"'shape': ({2**56 + 1}, 64), }}", b"\0" * 256), "targets": y})
npz("word", {"x": npy("{'descr': '<f4', 'fortran_order': False, 'shape': (two, 64), }",
                      b"\0" * 512), "targets": y})
npz("long", {"x": npy("{'descr': '<f4', 'fortran_order': False, "
                      "'shape': (99999999999999999999999, 64), }", b"\0" * 512), "targets": y})
npz("negative", {"x": npy("{'descr': '<f4', 'fortran_order': False, "
                          "'shape': (-2, 64), }", b"\0" * 512), "targets": y})
# Version 2 keeps its header length in bytes 8-11; this one ends at 11.
npz("cut", {"x": b"\x93NUMPY\x02\x00\x10\x00\x00", "targets": y})
# llm.c tokens: the header claims 2^31 - 1 tokens, the file holds 10.
header = np.zeros(256, np.int32)
header[0], header[1], header[2] = 20240520, 1, 2**31 - 1
with open(f"{out}/lying.bin", "wb") as f:
    f.write(header.tobytes() + np.arange(10, dtype=np.uint16).tobytes())
