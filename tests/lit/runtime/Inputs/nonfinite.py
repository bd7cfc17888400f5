"""Helpers for nonfinite.test.

  nonfinite.py data OUT.npz            MLP data (x [8,64], targets [8,32]),
                                       a NaN in row 4 (step 3 at batch 2)
  nonfinite.py poison IN OUT [KEY [V]] a safetensors file with one NaN (or
                                       V: inf, -inf) in its first tensor
                                       (or the first whose name holds KEY)
  nonfinite.py same A B                every tensor of A equals B's, bit
                                       for bit (prints "same" or the first
                                       that differs)
  nonfinite.py step MANIFEST N         the manifest with "step" set to N
  nonfinite.py log LOG                 step, loss, grad_norm,
                                       update_skipped, skipped_updates
"""
import json
import struct
import sys


def read(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    header = json.loads(b[8:8 + n])
    return b, n, header


def main():
    cmd = sys.argv[1]
    if cmd == "data":
        import numpy as np
        x = np.random.RandomState(0).randn(8, 64).astype(np.float32)
        t = np.random.RandomState(1).randn(8, 32).astype(np.float32)
        x[4, 3] = np.nan
        np.savez(sys.argv[2], x=x, targets=t)
    elif cmd == "poison":
        b, n, h = read(sys.argv[2])
        want = sys.argv[4] if len(sys.argv) > 4 else ""
        key = sorted(k for k in h if k != "__metadata__" and want in k)[0]
        at = 8 + n + h[key]["data_offsets"][0]
        out = bytearray(b)
        value = float(sys.argv[5]) if len(sys.argv) > 5 else float("nan")
        out[at:at + 4] = struct.pack("<f", value)
        open(sys.argv[3], "wb").write(out)
        print("poisoned", key.split("#")[0])
    elif cmd == "same":
        ba, na, ha = read(sys.argv[2])
        bb, nb, hb = read(sys.argv[3])
        for k in sorted(k for k in ha if k != "__metadata__"):
            oa, ob = ha[k]["data_offsets"], hb[k]["data_offsets"]
            if ba[8 + na + oa[0]:8 + na + oa[1]] != bb[8 + nb + ob[0]:8 + nb + ob[1]]:
                print("differs", k)
                return
        print("same", len(ha) - ("__metadata__" in ha))
    elif cmd == "step":
        m = json.load(open(sys.argv[2]))
        m["step"] = int(sys.argv[3])
        json.dump(m, open(sys.argv[2], "w"))
    elif cmd == "log":
        for line in open(sys.argv[2]):
            d = json.loads(line)
            print(" ".join(f"{k}={d[k]}" for k in
                           ("step", "loss", "grad_norm", "update_skipped",
                            "skipped_updates")))


main()
