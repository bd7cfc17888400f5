"""A model that checkpoints its own activations (torch.utils.checkpoint:
Hugging Face's `gradient_checkpointing_enable()`, a training script's
per-layer wrapper) asks for a memory/compute trade the trace cannot hold:
a capture records the forward once, and what a plan recomputes in
backward is fsdp-opt's `--activation-checkpointing`. While a model is
traced, `traced_through()` has torch.utils.checkpoint.checkpoint run the
function it is given as a plain call (its saved-tensor hooks are
autograd's business, and functorch's make_fx refuses them on 1.13) and
counts the calls. The count goes into the MLIR
(`fsdp.checkpointed_calls`), and fsdp-opt plans such a model with
`--activation-checkpointing=units` unless told otherwise (each unit's
forward recomputed, as per-layer checkpointing does); stderr says so, so
that the request is neither dropped nor changed in silence.

The names swapped are the ones `checkpoint` reads when it runs (so a
model that bound `checkpoint` before the trace is covered):
`_checkpoint_without_reentrant_generator` (use_reentrant=False,
transformers' default, PyTorch 2.x), `_checkpoint_without_reentrant` (the
same on 1.13) and `CheckpointFunction` (use_reentrant=True).
"""
import contextlib
import os
import sys

from .swap import swapped


def _caller():
    """FILE:LINE of the first code outside PyTorch above this call: the
    model's line that called torch.utils.checkpoint.checkpoint."""
    import torch
    inside = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
    frame = sys._getframe(2)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(inside):
        frame = frame.f_back
    if frame is None:  # pragma: no cover
        return "?"
    return f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"


@contextlib.contextmanager
def traced_through(calls):
    """While tracing: checkpoint() runs its function plainly; each call's
    FILE:LINE is appended to `calls`."""
    import torch.utils.checkpoint as cp

    def generator(function, *args, **kwargs):
        # checkpoint() calls the function itself between two next()s.
        calls.append(_caller())
        yield

    def without_reentrant(function, preserve_rng_state=True, *args, **kwargs):
        calls.append(_caller())
        return function(*args, **kwargs)

    class Reentrant:
        @staticmethod
        def apply(function, preserve_rng_state, *args):
            calls.append(_caller())
            return function(*args)

    swaps = {"_checkpoint_without_reentrant_generator": generator,
             "_checkpoint_without_reentrant": without_reentrant,
             "CheckpointFunction": Reentrant}  # those this PyTorch has
    try:
        with swapped(cp, swaps):
            yield
    finally:
        if calls:
            print(f"fsdp_trace: note: the model checkpoints activations (torch.utils.checkpoint, "
                  f"{len(calls)} call(s), first at {calls[0]}); the trace holds its forward, "
                  f"and fsdp-opt plans it with --activation-checkpointing=units (each unit "
                  f"recomputed in backward, as per-layer checkpointing does) unless given "
                  f"another --activation-checkpointing", file=sys.stderr)
