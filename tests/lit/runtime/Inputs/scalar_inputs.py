"""Helpers for scalar-inputs.test: a traced model whose step inputs are
0-dim and 1-dim, integer, boolean and float (traced_models.py:scalars).

  scalar_inputs.py data OUT.npz            the example inputs as 0-dim/1-dim
                                           arrays (and bad.npz beside it: a
                                           0-dim input given as [1])
  scalar_inputs.py check WEIGHTS LOG N     PyTorch's AdamW on the same
                                           weights and inputs for N steps;
                                           prints "match" when every logged
                                           loss is within 1e-5 relative
"""
import json
import os
import struct
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "frontend", "Inputs"))
import traced_models  # noqa: E402


def main():
    cmd = sys.argv[1]
    _, inputs = traced_models.scalars()
    if cmd == "data":
        arrays = {k: v.numpy() for k, v in inputs.items()}
        np.savez(sys.argv[2], **arrays)
        # Token ids as a data pipeline stores them (int32, uint16): fsdp-run
        # widens them to the plan's int64.
        narrow = {k: (v.astype(np.int32) if i % 2 == 0 else v.astype(np.uint16))
                  if v.dtype == np.int64 else v for i, (k, v) in enumerate(arrays.items())}
        assert any(v.dtype in (np.int32, np.uint16) for v in narrow.values())
        np.savez(os.path.join(os.path.dirname(sys.argv[2]), "narrow.npz"), **narrow)
        arrays["cond"] = arrays["cond"].reshape(1)
        np.savez(os.path.join(os.path.dirname(sys.argv[2]), "bad.npz"), **arrays)
        return
    weights, log, steps = sys.argv[2], sys.argv[3], int(sys.argv[4])
    b = open(weights, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    header = json.loads(b[8:8 + n])
    model = traced_models.Scalars()
    state = {}
    for name, info in header.items():
        if name != "__metadata__":
            lo, hi = info["data_offsets"]
            state[name] = torch.from_numpy(
                np.frombuffer(b[8 + n + lo:8 + n + hi], np.float32).reshape(info["shape"]).copy())
    model.load_state_dict(state)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    ours = [json.loads(line)["loss"] for line in open(log)]
    for step in range(steps):
        opt.zero_grad()
        loss = model(**inputs)
        loss.backward()
        opt.step()
        if abs(ours[step] - loss.item()) > 1e-5 * max(1.0, abs(loss.item())):
            print(f"step {step + 1}: loss {ours[step]} against PyTorch's {loss.item()}")
            return
    print("match", steps)


main()
