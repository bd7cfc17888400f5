"""The reliability suite's harness (run.py): running a binary with a
deadline, classifying what it did, the fixtures every class starts from,
and tmpfs mounts for full and read-only disks."""
import argparse
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
INPUTS = os.path.join(ROOT, "tests", "lit", "runtime", "Inputs")
PY = "/usr/bin/python3"
GEN = os.path.join(ROOT, "examples", "gen_model.py")
BADMODEL = os.path.join(ROOT, "tests", "frontend", "make_bad_model.py")
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]
CRASH = re.compile(r"AddressSanitizer|terminate called|Assertion .* failed|LLVM ERROR|"
                   r"Segmentation fault|core dumped|PLEASE submit a bug report|"
                   r"Stack dump|std::bad_alloc|uncaught exception")
COLUMNS = ["clean error", "correct", "crash", "hang", "wrong success",
           "wrong failure", "unclear error", "data loss"]


class Result:
    def __init__(self, rc, out, err, timed_out=False):
        self.rc, self.out, self.err, self.timed_out = rc, out, err, timed_out


def run(argv, timeout=60, env=None, cwd=None):
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                           env=dict(os.environ, **(env or {})), cwd=cwd,
                           errors="replace")
        return Result(p.returncode, p.stdout, p.stderr)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        return Result(None, out, err, True)


def digest(path):
    if os.path.islink(path):
        return "link:" + os.readlink(path)
    if not os.path.exists(path):
        return None
    if os.path.isdir(path):
        return {name: digest(os.path.join(path, name)) for name in sorted(os.listdir(path))}
    st = os.stat(path)
    if not os.path.isfile(path):
        return f"special:{st.st_mode:o}:{st.st_rdev}"
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


class Suite:
    def __init__(self, build, tmp, verbose):
        self.tools = os.path.join(build, "tools")
        self.tmp = tmp
        self.verbose = verbose
        self.rows = {}  # class -> {column: count}
        self.failures = []
        self.skips = []
        self.root = os.geteuid() == 0
        self.mpirun = shutil.which("mpirun") is not None

    def tool(self, name):
        return os.path.join(self.tools, name)

    def p(self, *parts):
        return os.path.join(self.tmp, *parts)

    def skip(self, cls, name, why):
        self.skips.append(f"{cls}: {name}: skipped ({why})")

    def case(self, cls, name, argv=None, expect="error", match=None, protect=(),
             timeout=60, action=None, check=None, env=None):
        """argv runs the case (or `action()` returns a Result); `expect` is
        "error" (and `match` must be found in stderr) or "ok" (and `check(r)`,
        if given, returns None or what is wrong)."""
        before = {path: digest(path) for path in protect}
        r = action() if action else run(argv, timeout=timeout, env=env, cwd=self.tmp)
        changed = [path for path in protect if digest(path) != before[path]]
        text = (r.err or "") + (r.out or "")
        why = ""
        if r.timed_out:
            verdict, why = "hang", f"still running after {timeout} s"
        elif (r.rc is not None and (r.rc < 0 or r.rc >= 128)) or CRASH.search(text):
            verdict, why = "crash", f"exit {r.rc}"
        elif changed:
            verdict, why = "data loss", "changed: " + ", ".join(changed)
        elif expect == "error":
            if r.rc == 0:
                verdict, why = "wrong success", "exit 0"
            elif match and not re.search(match, r.err or ""):
                verdict, why = "unclear error", f"no /{match}/ in the message"
            else:
                verdict = "clean error"
        else:
            if r.rc != 0:
                verdict, why = "wrong failure", f"exit {r.rc}"
            else:
                problem = check(r) if check else None
                verdict, why = ("correct", "") if problem is None else ("wrong success", problem)
        row = self.rows.setdefault(cls, {c: 0 for c in COLUMNS})
        row[verdict] += 1
        ok = verdict in ("clean error", "correct")
        if not ok:
            first = (r.err or "").strip().splitlines()[:3]
            self.failures.append(f"{cls}: {name}: {verdict} ({why}) {' | '.join(first)}")
        if self.verbose or not ok:
            print(f"{'ok  ' if ok else 'FAIL'} {cls}: {name}: {verdict}"
                  + (f" ({why})" if why else ""), flush=True)
        return r

    def table(self):
        lines = ["| class | tried | " + " | ".join(COLUMNS) + " |",
                 "|---|---|" + "---|" * len(COLUMNS)]
        total = {c: 0 for c in COLUMNS}
        for cls, row in self.rows.items():
            tried = sum(row.values())
            lines.append(f"| {cls} | {tried} | " + " | ".join(str(row[c]) for c in COLUMNS) + " |")
            for c in COLUMNS:
                total[c] += row[c]
        lines.append(f"| all | {sum(total.values())} | " +
                     " | ".join(str(total[c]) for c in COLUMNS) + " |")
        return "\n".join(lines)


# ---------------------------------------------------------------- fixtures

def fixtures(s):
    def must(argv, env=None):
        r = run(argv, timeout=300, cwd=s.tmp, env=env)
        if r.rc != 0:
            sys.exit(f"fixture failed: {' '.join(argv)}\n{r.err}")
    must([PY, GEN, "gpt2", "-o", s.p("g.onnx"), "--loss", "--layers", "2", "--dim", "16",
          "--seq", "8", "--vocab", "32", "--heads", "2", "--batch", "2"])
    must([s.tool("fsdp-opt"), s.p("g.onnx"), "-o", s.p("g.plan")])
    must([s.tool("fsdp-opt"), s.p("g.onnx"), "-o", s.p("g2.plan"), "--world-size=2"])
    must([PY, GEN, "mlp", "-o", s.p("mlp.onnx"), "--loss", "mse"])
    os.makedirs(s.p("traced"))
    must([PY, "-m", "fsdp_trace", GEN + ":factory", "--args", "model=mlp", "loss=mse",
          "-o", s.p("traced", "t.mlir")], env={"PYTHONPATH": os.path.join(ROOT, "python")})
    must([s.tool("fsdp-opt"), s.p("traced", "t.mlir"), "-o", s.p("t.plan")])
    must([s.tool("fsdp-opt"), s.p("mlp.onnx"), "-o", s.p("mlp.plan")])
    os.makedirs(s.p("ext"))
    must([PY, BADMODEL, "external-ok", "-o", s.p("ext", "m.onnx")])
    must([s.tool("fsdp-opt"), s.p("ext", "m.onnx"), "--loss=mse", "-o", s.p("ext.plan")])
    must([s.tool("fsdp-run"), s.p("g.plan"), "--steps", "2", "--quiet",
          "--checkpoint-dir", s.p("ck"), "--save-full", s.p("w.safetensors"),
          "--trace", s.p("trace.json")])
    must([s.tool("fsdp-run"), s.p("mlp.plan"), "--steps", "2", "--quiet",
          "--checkpoint-dir", s.p("mck")])
    os.makedirs(s.p("data"))
    must([PY, os.path.join(INPUTS, "make_bad_data.py"), s.p("data")])
    must([PY, os.path.join(INPUTS, "nonfinite.py"), "data", s.p("nan.npz")])
    with open(s.p("precious"), "w") as f:
        f.write("precious\n")


def copy_ck(s, name, src="mck"):
    dst = s.p(name)
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(s.p(src), dst, symlinks=True)
    return dst


def edit_manifest(s, name, field, value, src="mck"):
    """A copy of checkpoint `src`'s latest step with one manifest field set."""
    step = open(s.p(src, "latest")).read().strip()
    dst = s.p(name)
    shutil.rmtree(dst, ignore_errors=True)
    r = run([PY, os.path.join(INPUTS, "edit_manifest.py"), s.p(src, step), dst, field, value])
    if r.rc != 0:
        sys.exit(f"edit_manifest failed: {r.err}")
    return dst


class Mount:
    """A tmpfs at `path` (root only): `size` bytes, read-only if asked."""

    def __init__(self, path, size="64k", readonly=False):
        self.path, self.size, self.readonly = path, size, readonly

    def __enter__(self):
        os.makedirs(self.path, exist_ok=True)
        r = run(["mount", "-t", "tmpfs", "-o", f"size={self.size}", "tmpfs", self.path])
        if r.rc != 0:
            raise OSError(r.err.strip())
        return self

    def fill(self):
        fd = os.open(os.path.join(self.path, "filler"), os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            while True:
                os.write(fd, b"\0" * 4096)
        except OSError:
            pass
        finally:
            os.close(fd)

    def remount_ro(self):
        r = run(["mount", "-o", "remount,ro", self.path])
        if r.rc != 0:
            raise OSError(r.err.strip())

    def __exit__(self, *exc):
        run(["umount", "-l", self.path])
