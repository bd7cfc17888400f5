"""fsdp-run checkpoints <-> torch.distributed.checkpoint (DCP).

An fsdp-run checkpoint (runtime/io/Checkpoint.cpp, version 2) is a
directory `step-N/` with `manifest.json` (the training position, and for
each parameter its shape and the pieces [begin, begin + count) of its
flattened elements, each in a named safetensors file) and the files, whose
tensors are named `NAME#BEGIN`, `NAME.exp_avg#BEGIN` and
`NAME.exp_avg_sq#BEGIN`; `latest` beside it names the newest.

A DCP checkpoint of a model and its AdamW is what
`dcp.save({"model": model_sd, "optim": optim_sd})` writes with
`model_sd, optim_sd = get_state_dict(model, optimizer)`: parameters by
fully qualified name, optimizer state by the same names (`step`, `exp_avg`,
`exp_avg_sq`), and the param groups. Both sides are whole tensors here: DCP
reshards when it loads into a sharded model, and fsdp-run reads the pieces
its plan needs from the one file written here.

The training position: fsdp-run's `step` counts optimizer steps and
`skipped_updates` those whose gradient was not finite; AdamW's bias
correction counts the updates made, which is PyTorch's per-parameter
`step`. DCP's own files are read with PyTorch's loader (which unpickles
its metadata): a DCP checkpoint is trusted as torch trusts it.
"""
import json
import os
import shutil

import numpy as np

FORMAT, VERSION = "fsdp-checkpoint", 2
SUFFIXES = {"exp_avg": ".exp_avg", "exp_avg_sq": ".exp_avg_sq"}


class CheckpointError(Exception):
    """A checkpoint or plan that cannot be converted (the message says why)."""


def _plan(path):
    try:
        with open(path) as f:
            plan = json.load(f)
    except (OSError, ValueError) as e:
        raise CheckpointError(f"{path}: not a readable plan ({e})") from None
    if plan.get("train", {}).get("optimizer") != "adamw":
        raise CheckpointError(f"{path}: the plan's optimizer is "
                              f"'{plan.get('train', {}).get('optimizer')}'; only AdamW's "
                              f"state converts")
    hyper = next((ins.get("attrs") for ins in plan.get("program", [])
                  if isinstance(ins, dict) and "beta1" in ins.get("attrs", {})), None)
    return plan, hyper


def _numel(shape):
    n = 1
    for d in shape:
        n *= int(d)
    return n


def _write_fsdp(out, plan, tensors, step, skipped, data, seed):
    """`tensors`: name -> {"value", "exp_avg", "exp_avg_sq"} float32 arrays."""
    from safetensors.numpy import save_file
    name = f"step-{step}"
    os.makedirs(out, exist_ok=True)
    tmp, final = os.path.join(out, name + ".tmp"), os.path.join(out, name)
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    flat, params = {}, {}
    for p in plan["params"]:
        state = tensors[p["name"]]
        n = _numel(p["shape"])
        flat[f"{p['name']}#0"] = np.ascontiguousarray(state["value"].reshape(n), np.float32)
        if p.get("trainable"):
            for key, suffix in SUFFIXES.items():
                flat[f"{p['name']}{suffix}#0"] = np.ascontiguousarray(
                    state[key].reshape(n), np.float32)
        params[p["name"]] = {"shape": p["shape"], "trainable": bool(p.get("trainable")),
                             "momentum_started": bool(p.get("trainable")),
                             "pieces": [{"file": "rank-00000.safetensors", "begin": 0,
                                         "count": n}]}
    save_file(flat, os.path.join(tmp, "rank-00000.safetensors"), metadata={"format": "pt"})
    manifest = {"format": FORMAT, "version": VERSION, "step": step, "skipped_updates": skipped,
                "seed": seed, "data": data, "optimizer": "adamw",
                "world_size": plan["meta"]["world_size"], "strategy": plan["meta"]["strategy"],
                "replicate_groups": plan["meta"].get("replicate_groups", 1), "params": params}
    with open(os.path.join(tmp, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    shutil.rmtree(final, ignore_errors=True)
    os.rename(tmp, final)
    with open(os.path.join(out, "latest.tmp"), "w") as f:
        f.write(name + "\n")
    os.replace(os.path.join(out, "latest.tmp"), os.path.join(out, "latest"))
    return final


def _initial(plan, name, plan_path):
    """`name`'s value in the weights file the plan was made from."""
    from safetensors.numpy import load_file
    meta = plan.get("meta", {})
    path = meta.get("source", "")
    if path and not os.path.isabs(path):
        path = os.path.join(meta.get("source_base", ""), path)
    try:
        return load_file(path)[name]
    except (OSError, KeyError, ValueError) as e:
        raise CheckpointError(f"{plan_path}: '{name}' is not in the checkpoint (a buffer the "
                              f"model does not save), and the plan's weights file '{path}' "
                              f"does not give it ({type(e).__name__})") from None


def from_dcp(source, out, plan_path, data="synthetic", seed=0):
    """A DCP checkpoint of {"model", "optim"} -> an fsdp-run checkpoint
    for `plan_path` in `out` (its step-N directory is returned)."""
    import tempfile
    import torch
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save
    plan, _ = _plan(plan_path)
    if not os.path.isfile(os.path.join(source, ".metadata")):
        raise CheckpointError(f"{source}: not a DCP checkpoint (no .metadata)")
    with tempfile.TemporaryDirectory() as tmp:
        whole = os.path.join(tmp, "whole.pt")
        dcp_to_torch_save(source, whole)
        state = torch.load(whole, weights_only=False)
    model = state.get("model")
    optim = state.get("optim", {}).get("state")
    if not isinstance(model, dict) or not isinstance(optim, dict):
        raise CheckpointError(f"{source}: expected {{'model': ..., 'optim': {{'state': ...}}}} "
                              f"as get_state_dict(model, optimizer) gives")
    tensors, steps = {}, set()
    for p in plan["params"]:
        name = p["name"]
        if name not in model and not p.get("trainable"):
            # A buffer the model does not save (persistent=False: RoPE's
            # inv_freq) keeps the value the plan was made with.
            tensors[name] = {"value": _initial(plan, name, plan_path)}
            continue
        if name not in model:
            raise CheckpointError(f"{source}: no parameter '{name}' (the plan's) in the model "
                                  f"state ({len(model)} names, e.g. {sorted(model)[:3]})")
        value = model[name].detach().float()
        if list(value.shape) != list(p["shape"]):
            raise CheckpointError(f"{source}: '{name}' has shape {list(value.shape)}, the plan "
                                  f"{p['shape']}")
        entry = {"value": value.numpy()}
        if p.get("trainable"):
            s = optim.get(name)
            if not isinstance(s, dict) or any(k not in s for k in ("exp_avg", "exp_avg_sq", "step")):
                raise CheckpointError(f"{source}: no AdamW state (step, exp_avg, exp_avg_sq) "
                                      f"for '{name}'")
            for k in SUFFIXES:
                entry[k] = s[k].detach().float().numpy()
            steps.add(int(float(s["step"])))
        tensors[name] = entry
    if len(steps) > 1:
        raise CheckpointError(f"{source}: the parameters were updated different numbers of "
                              f"times ({sorted(steps)}); fsdp-run's AdamW counts one step")
    step = steps.pop() if steps else 0
    return _write_fsdp(out, plan, tensors, step, 0, data, seed)


def _resolve(source):
    if os.path.isfile(os.path.join(source, "manifest.json")):
        return source
    try:
        with open(os.path.join(source, "latest")) as f:
            name = f.readline().strip()
    except OSError:
        raise CheckpointError(f"{source}: neither a checkpoint (manifest.json) nor a "
                              f"checkpoint directory (latest)") from None
    if not name or "/" in name or name in (".", ".."):
        raise CheckpointError(f"{source}/latest: names no checkpoint")
    return os.path.join(source, name)


def _read_fsdp(source, plan):
    from safetensors.numpy import load_file
    d = _resolve(source)
    try:
        with open(os.path.join(d, "manifest.json")) as f:
            m = json.load(f)
    except (OSError, ValueError) as e:
        raise CheckpointError(f"{d}/manifest.json: {e}") from None
    if m.get("format") != FORMAT or m.get("version") != VERSION:
        raise CheckpointError(f"{d}: not a version {VERSION} fsdp-run checkpoint")
    files, tensors = {}, {}
    for p in plan["params"]:
        name = p["name"]
        saved = m.get("params", {}).get(name)
        if saved is None or list(saved.get("shape", [])) != list(p["shape"]):
            raise CheckpointError(f"{d}: '{name}' is missing or has another shape")
        n = _numel(p["shape"])
        keys = {"value": ""}
        if p.get("trainable"):
            keys.update(SUFFIXES)
        entry = {}
        for key, suffix in keys.items():
            out = np.zeros(n, np.float32)
            covered = 0
            for piece in saved["pieces"]:
                f = piece["file"]
                if "/" in f or f in (".", ".."):
                    raise CheckpointError(f"{d}: piece file '{f}' is not in the checkpoint")
                if f not in files:
                    files[f] = load_file(os.path.join(d, f))
                t = files[f].get(f"{name}{suffix}#{piece['begin']}")
                b, c = int(piece["begin"]), int(piece["count"])
                if t is None or t.size != c or b < 0 or b + c > n:
                    raise CheckpointError(f"{d}: '{name}{suffix}#{b}' is missing or wrong")
                out[b:b + c] = t.reshape(c)
                covered += c
            if covered != n:
                raise CheckpointError(f"{d}: '{name}{suffix}' covers {covered} of {n} elements")
            entry[key] = out.reshape(p["shape"])
        tensors[name] = entry
    return d, m, tensors


def to_dcp(source, out, plan_path):
    """An fsdp-run checkpoint -> a DCP checkpoint of {"model", "optim"}
    in `out` (returned)."""
    import torch
    import torch.distributed.checkpoint as dcp
    plan, hyper = _plan(plan_path)
    d, m, tensors = _read_fsdp(source, plan)
    updates = int(m["step"]) - int(m.get("skipped_updates", 0))
    model, state, names = {}, {}, []
    for p in plan["params"]:
        t = tensors[p["name"]]
        model[p["name"]] = torch.from_numpy(t["value"])
        if p.get("trainable"):
            names.append(p["name"])
            state[p["name"]] = {"step": torch.tensor(float(updates)),
                                "exp_avg": torch.from_numpy(t["exp_avg"]),
                                "exp_avg_sq": torch.from_numpy(t["exp_avg_sq"])}
    # This PyTorch's AdamW param group, with the plan's hyper-parameters.
    group = dict(torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))]).state_dict()
                 ["param_groups"][0])
    if hyper:
        group.update(lr=float(hyper["lr"]), betas=(float(hyper["beta1"]), float(hyper["beta2"])),
                     eps=float(hyper["eps"]), weight_decay=float(hyper["weight_decay"]))
    group["params"] = names
    tmp = out.rstrip("/") + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    dcp.save({"model": model, "optim": {"state": state, "param_groups": [group]}},
             storage_writer=dcp.FileSystemWriter(tmp))
    shutil.rmtree(out, ignore_errors=True)
    os.rename(tmp, out)
    return out
