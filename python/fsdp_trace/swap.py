"""Attributes of PyTorch's modules swapped for the length of a capture:
the tracer's way of having PyTorch's own Python take another path while a
model is traced (flex_attention.py, checkpointing.py, capture.py's data
checks), each restored however the block ends."""
import contextlib


@contextlib.contextmanager
def swapped(owner, replacements):
    """`owner`'s attributes named in `replacements` (name -> value) set to
    those values inside the block; names `owner` lacks are left alone.
    Yields the originals swapped out (name -> value)."""
    saved = {name: getattr(owner, name) for name in replacements if hasattr(owner, name)}
    for name in saved:
        setattr(owner, name, replacements[name])
    try:
        yield saved
    finally:
        for name, value in saved.items():
            setattr(owner, name, value)
