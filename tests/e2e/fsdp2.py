"""PyTorch FSDP2 as the side-by-side runs use it (torch 2.x, Gloo, CPU):
fully_shard on each layer then the root, and one training step whose loss
is averaged over the ranks (shared by tests/e2e/dcp_roundtrip.py and
bench/vs_pytorch_fsdp.py)."""


def shard(model, layers, world):
    """fully_shard each of `layers`, then `model` (reshard after forward,
    FSDP2's default), on a 1-D CPU mesh of `world` ranks."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    mesh = init_device_mesh("cpu", (world,))
    for layer in layers:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def train_step(model, opt, ids, loss_fn, world):
    """Forward on `ids` (labels = ids), backward, the optimizer's step;
    returns the loss averaged over the ranks."""
    import torch.distributed as dist
    loss = loss_fn(model(input_ids=ids).logits, ids)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    mean = loss.detach().clone()
    dist.all_reduce(mean)
    return float(mean) / world


def finish():
    """End a worker without tearing Gloo down: every rank passes a barrier
    (none is still in a collective), then the process exits at once with 0.

    torch 2.11 aborted a rank in Gloo's teardown ("terminate called without
    an active exception", SIGABRT) in two fresh-clone runs, once after
    destroy_process_group and once with a barrier before it; the abort is in
    C++ destructors that os._exit skips. Everything a worker writes is
    closed before this is called."""
    import os
    import sys
    import torch.distributed as dist
    dist.barrier()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
