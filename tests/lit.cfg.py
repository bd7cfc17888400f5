# -*- Python -*-
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "fsdp"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.join(os.path.dirname(__file__), "lit")
config.test_exec_root = os.path.join(config.fsdp_obj_root, "tests")
config.excludes = ["Inputs"]

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.fsdp_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
# Plans are priced on the fixed built-in CPU, the same on every machine
# (fsdp-opt's default, --device=cpu, is this machine, measured and cached),
# and no test touches the user's calibration cache.
config.environment["FSDP_DEVICE"] = "cpu-generic"
config.environment["FSDP_CACHE_DIR"] = os.path.join(config.fsdp_obj_root, "tests",
                                                    "calibration-cache")

# Model generators run under Debian's interpreter (python3-torch, -onnx).
# `lit --param python=/opt/fsdp/torch2/bin/python` runs the tracer's tests
# (%trace, %python) on the pinned PyTorch 2.x instead; ONNX export (%gen)
# stays on Debian's.
python = lit_config.params.get("python", "/usr/bin/python3")
config.available_features.add("torch2" if python != "/usr/bin/python3" else "torch113")
config.substitutions.append(("%python", python))
config.substitutions.append(
    ("%gen", "/usr/bin/python3 " + os.path.join(config.fsdp_src_root,
                                                "examples", "gen_model.py")))
# The tracer (python/fsdp_trace) as a user runs it.
config.substitutions.append(
    ("%trace", "env PYTHONPATH=" + os.path.join(config.fsdp_src_root, "python") +
     " " + python + " -m fsdp_trace"))
config.substitutions.append(
    ("%fitcheck", "/usr/bin/python3 " + os.path.join(
        config.test_source_root, "runtime", "Inputs", "fit_check.py")))
config.substitutions.append(
    ("%comparelogs", "/usr/bin/python3 " + os.path.join(
        config.test_source_root, "runtime", "Inputs", "compare_logs.py")))
config.substitutions.append(
    ("%badmodel", "/usr/bin/python3 " + os.path.join(
        config.fsdp_src_root, "tests", "frontend", "make_bad_model.py")))


def _free_port():
    """A TCP port nothing listens on now (for a rank 0 that must wait)."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


config.substitutions.append(("%free_port", _free_port()))
