#!/usr/bin/env python3
"""A small next-token dataset for the demo: sequences that count upwards
modulo the vocabulary from random starts, with targets shifted by one, as
an .npz with `input_ids` and `targets` (the names gen_model.py's GPT-2 with
--loss uses). A model that learns "next = current + 1" drives the loss down.

    make_dataset.py OUT.npz --rows 64 --seq 32 --vocab 256
"""
import argparse

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("output")
ap.add_argument("--rows", type=int, default=64)
ap.add_argument("--seq", type=int, default=32)
ap.add_argument("--vocab", type=int, default=256)
ap.add_argument("--seed", type=int, default=0)
a = ap.parse_args()
rng = np.random.default_rng(a.seed)
start = rng.integers(0, a.vocab, size=(a.rows, 1))
tokens = (start + np.arange(a.seq + 1)[None, :]) % a.vocab
np.savez(a.output, input_ids=tokens[:, :-1].astype(np.int64),
         targets=tokens[:, 1:].astype(np.int64))
