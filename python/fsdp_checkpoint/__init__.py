"""fsdp_checkpoint: fsdp-run's checkpoints and PyTorch's, both ways.

    python -m fsdp_checkpoint from-dcp DCP_DIR OUT_DIR --plan PLAN [--data D --seed S]
    python -m fsdp_checkpoint to-dcp CKPT_DIR OUT_DIR --plan PLAN

`from-dcp` reads a checkpoint torch.distributed.checkpoint (DCP) wrote from
a model and its AdamW (`get_state_dict(model, optimizer)` saved as
{"model": ..., "optim": ...}, any world size, any sharding) and writes
an fsdp-run checkpoint (`step-N/manifest.json` + a safetensors file) that
`fsdp-run PLAN --resume OUT_DIR` takes on any world size. `to-dcp` writes
an fsdp-run checkpoint (any world size) as a DCP checkpoint of the same
form, which `dcp.load` reads into an FSDP2 model and optimizer of any
world size (DCP reshards on load). Needs PyTorch 2.x (DCP).
"""
from .dcp import from_dcp, to_dcp  # noqa: F401
