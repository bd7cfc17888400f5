"""FlexAttention (torch.nn.attention.flex_attention, PyTorch 2.5+) traced as
the ATen ops of PyTorch's own eager implementation.

`flex_attention(q, k, v, score_mod, block_mask)` is a higher-order op: its
score_mod and the block mask's mask_mod are Python functions of
(score, batch, head, q_idx, kv_idx), and PyTorch runs it only through
torch.compile. On the CPU it refuses any input that requires grad
("FlexAttention does not support backward on CPU"), so a model written
with it (torchtitan's language models use nothing else) could not be
captured at all: the capture traces with the parameters requiring grad.

fsdp differentiates the step itself, and needs from PyTorch only the
forward as ATen ops. While a model is traced, `as_ops()` has
flex_attention call `math_attention`, PyTorch's eager reference of the
op (torch/_higher_order_ops/flex_attention.py): the scores materialized,
score_mod and mask_mod evaluated over index grids by vmap, masked
positions at -inf, a softmax that gives a fully masked row zeros. That is
the function flex_attention's compiled kernels are tested against, so the
traced step computes what they do; the plan materializes the [B, H, Lq,
Lkv] scores as the SDPA lowering does, and a mask depending only on the
indices (causal, sliding window) is the same at every step. The block
mask's block tables only skip work the mask_mod already zeroes; like
math_attention, the trace reads the mask_mod alone.

Four names of flex_attention's module are swapped while tracing, each
read when the function runs, so a model that imported flex_attention (or
wrapped it in torch.compile) before the trace is covered too:
`_validate_device` (its CPU refusal of inputs requiring grad),
`_FLEX_ATTENTION_DISABLE_COMPILE_DEBUG` and `setup_compilation_env` (no
torch.compile, whose region hides the ops from torch.export's capture)
and `flex_attention_hop` (the op itself). A PyTorch without the module
traces as before; one whose module lacks a name is refused naming it, not
traced into something else.
"""
import contextlib

from .swap import swapped

def _modules():
    """flex_attention's module and the one holding math_attention, or None
    where this PyTorch has no FlexAttention (1.13)."""
    import importlib
    try:
        # By module name: torch._higher_order_ops exports the op itself
        # under the same name as the module that defines it.
        return tuple(importlib.import_module(name) for name in (
            "torch.nn.attention.flex_attention", "torch._higher_order_ops.flex_attention"))
    except ImportError:
        return None


def _validate_device(query, key, value):
    """flex_attention's own check, less its refusal of inputs requiring
    grad on the CPU: the step's gradient is fsdp's, not PyTorch's kernel's."""
    supported = {"cuda", "cpu", "xpu", "hpu", "meta"}
    if query.device.type not in supported:
        raise ValueError(f"FlexAttention is only supported on CUDA, CPU or HPU devices. "
                         f"Found input tensors on {query.device.type} device.")


@contextlib.contextmanager
def as_ops():
    """While tracing: flex_attention as PyTorch's eager math (module doc)."""
    found = _modules()
    if found is None:
        yield
        return
    api, hop = found

    def flex_attention_hop(query, key, value, score_mod, block_mask, scale, kernel_options,
                           score_mod_other_buffers=(), mask_mod_other_buffers=()):
        return hop.math_attention(query, key, value, score_mod, block_mask, scale,
                                  kernel_options, score_mod_other_buffers,
                                  mask_mod_other_buffers)

    replacements = {"_validate_device": _validate_device,
                    "_FLEX_ATTENTION_DISABLE_COMPILE_DEBUG": True,
                    "setup_compilation_env": contextlib.nullcontext,
                    "flex_attention_hop": flex_attention_hop}
    missing = [n for n in replacements if not hasattr(api, n)]
    if missing or not hasattr(hop, "math_attention"):
        from .mlir import TraceError
        raise TraceError(
            f"torch.nn.attention.flex_attention of this PyTorch has no "
            f"{', '.join(missing or ['math_attention'])}: fsdp_trace cannot trace FlexAttention "
            f"as ATen ops on it (it knows 2.11's)")
    with swapped(api, replacements):
        yield
