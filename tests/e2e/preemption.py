#!/usr/bin/env python3
"""Preempted, restarted, resumed: nothing lost.

One command line (--checkpoint-dir D --resume=auto) is launched again and
again; each launch but the last is interrupted at a random moment, and the
final weights (--save-full) must equal, byte for byte, those of a run that
was never interrupted, and every step's logged loss the uninterrupted
run's. The interruptions:

  - SIGTERM to the only rank (1 rank), to one rank of two (a signal sent
    by hand), to both (Slurm signals every task) and to mpirun (which
    forwards it), under mpirun; SIGUSR1 too;
  - SIGTERM to one worker under torchrun (Gloo, no MPI);
  - the same while a checkpoint is written after every step (the signal
    then often lands mid-save), synchronously and in the background
    (--checkpoint-async: mid-write), and two signals 5 ms apart (the
    second gives up the save: the previous checkpoint must still be
    whole);
  - torchrun --max-restarts=2 with one worker SIGKILLed mid-run: the
    restarted workers resume by themselves from the last checkpoint.

A launch ended by a signal it caught exits with 128 + the signal's number
after saving (143 for SIGTERM); one that had not yet installed its
handlers dies of the signal, and the next launch resumes from the
previous checkpoint. The random moments come from a fixed seed.
"""
import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bounded  # noqa: E402

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]
TORCHRUN = ["/usr/bin/python3", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                             "scripts", "torchrun.py")]
STEPS = 80
PORT = 29800 + os.getpid() % 1500


def workers(marker):
    """The fsdp-run processes whose command line holds `marker`."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() != "fsdp-run":
                    continue
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    found.append(int(pid))
        except OSError:
            pass
    return sorted(found)


def launcher(kind, world, cmd, restarts=0):
    global PORT
    if kind == "direct":
        return cmd
    if kind == "mpirun":
        return MPIRUN + ["-np", str(world)] + cmd
    PORT += 2
    return TORCHRUN + ["--nproc_per_node", str(world), "--master_addr", "127.0.0.1",
                       "--master_port", str(PORT), "--max_restarts", str(restarts),
                       "--no_python"] + cmd


def losses_rows(path):
    """The log's rows so far (none before it exists)."""
    rows = []
    try:
        with open(path) as f:
            for line in f:
                try:
                    rows.append(json.loads(line))
                except ValueError:
                    pass  # a line being written
    except OSError:
        pass
    return rows


def losses(path):
    """The last logged loss of each step (a resumed run appends; steps
    after the last checkpoint of an interrupted launch are logged twice)."""
    return {row["step"]: row["loss"] for row in losses_rows(path)}


def interrupt(proc, marker, how, rng, expected_ranks, log):
    """Once the launch has logged steps of its own, waits a random share
    of the time its remaining steps take (read off the log, so a loaded
    machine moves the moment with it), then sends `how` to the launch."""
    before = len(losses_rows(log))
    # Two steps of its own: the first (caches, pages) is slower than the rest.
    while proc.poll() is None and len(losses_rows(log)) < before + 2:
        time.sleep(0.005)
    if proc.poll() is not None:
        return "finished first"
    rows = losses_rows(log)[before:]
    last = rows[-1]
    step_s = max(min(r["step_ms"] for r in rows) / 1000, 0.005)
    at = rng.uniform(0.0, 0.35) * (STEPS - last["step"]) * step_s
    time.sleep(at)
    if how == "kill-one":
        # After the first periodic checkpoint, so the restarted workers
        # have one to resume from.
        while not os.path.exists(os.path.join(marker, "latest")) and proc.poll() is None:
            time.sleep(0.01)
        time.sleep(rng.uniform(0.0, 0.3))
    ranks = workers(marker)
    while len(ranks) < expected_ranks and proc.poll() is None:
        time.sleep(0.01)  # a launcher's workers start late (torchrun)
        ranks = workers(marker)
    if proc.poll() is not None:
        return "finished first"
    if how == "launcher":
        targets = [proc.pid]
        sig = signal.SIGTERM
    elif how in ("one", "one-usr1", "kill-one"):
        targets = [rng.choice(ranks)] if ranks else [proc.pid]
        sig = {"one": signal.SIGTERM, "one-usr1": signal.SIGUSR1,
               "kill-one": signal.SIGKILL}[how]
    else:  # "all", "twice"
        targets = ranks or [proc.pid]
        sig = signal.SIGTERM
    for pid in targets:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
    if how == "twice":
        time.sleep(0.005)
        for pid in targets:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    return f"{signal.Signals(sig).name} to {len(targets)}, {at:.2f} s after step {last['step']}"


def scenario(*args, **kwargs):
    """A case, again from scratch while no signal landed before its launch
    finished (a loaded machine can outrun the moment chosen)."""
    for _ in range(3):
        interrupted = attempt(*args, **kwargs)
        if interrupted is not None:
            return interrupted
    raise SystemExit(f"FAIL {args[0]}: every launch finished before its signal, 3 times")


def attempt(name, plan, world, kind, how, extra, reference, tmp, rng, fsdp_run, env=None):
    d = os.path.join(tmp, name.replace(" ", "-"))
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    ck, log, out = os.path.join(d, "ck"), os.path.join(d, "log.jsonl"), os.path.join(d, "out.safetensors")
    cmd = [fsdp_run, plan, "--steps", str(STEPS), "--quiet", "--checkpoint-dir", ck,
           "--resume=auto", "--log", log, "--save-full", out] + extra
    restarts = 2 if how == "kill-one" else 0
    if how == "kill-one":
        cmd.remove("--quiet")  # rank 0 says where the restarted workers resume
    wanted, codes, interrupted = 2 if how != "kill-one" else 1, [], 0
    for launch in range(8):
        proc = subprocess.Popen(launcher(kind, world, cmd, restarts), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True,
                                env=dict(os.environ, **(env or {})))
        what = None
        if interrupted < wanted:
            what = interrupt(proc, ck, how, rng, world, log)
        try:
            said, err = proc.communicate(timeout=180)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise SystemExit(f"FAIL {name}: launch {launch + 1} hung")
        codes.append(proc.returncode)
        if what and what != "finished first":
            interrupted += 1
            # A caught signal: 128 + its number, after the save; mpirun
            # (signalled itself) and torchrun (a worker failed) say 1; a
            # launch signalled before its handlers were installed dies of
            # the signal (-15 when direct, 143 through a launcher).
            expected = {0, 1, 143, 138, -signal.SIGTERM, -signal.SIGUSR1}
            if how == "kill-one":
                expected = {0}  # torchrun restarts the workers
            if proc.returncode not in expected:
                raise SystemExit(f"FAIL {name}: launch {launch + 1} ({what}) exited "
                                 f"{proc.returncode}:\n{err[-3000:]}")
        elif proc.returncode != 0:
            raise SystemExit(f"FAIL {name}: an uninterrupted launch exited {proc.returncode}:\n"
                             f"{err[-2000:]}")
        if how == "kill-one" and what != "finished first" and "resumed from" not in said:
            raise SystemExit(f"FAIL {name}: the restarted workers did not resume "
                             f"(exit {proc.returncode}):\n{said[-1000:]}\n{err[-2000:]}")
        if proc.returncode == 0:
            break
    else:
        raise SystemExit(f"FAIL {name}: never finished (exit codes {codes})")
    if interrupted == 0:
        return None  # every launch finished before its signal: again
    with open(out, "rb") as f, open(reference["weights"], "rb") as g:
        same = f.read() == g.read()
    got, want = losses(log), reference["losses"]
    if not same or got != want:
        bad = [s for s in want if got.get(s) != want[s]][:3]
        raise SystemExit(f"FAIL {name}: {'weights differ' if not same else ''} "
                         f"losses differ at steps {bad} (exit codes {codes})")
    print(f"PASS {name}: {len(codes)} launches, exit codes {codes}, "
          f"bitwise equal to the uninterrupted run")
    return interrupted


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fsdp-opt", required=True)
    ap.add_argument("--fsdp-run", required=True)
    ap.add_argument("--generator", required=True)
    ap.add_argument("--seed", type=int, default=20261126)
    ap.add_argument("--only", help="run the cases whose name holds this")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    tmp = tempfile.mkdtemp(prefix="fsdp-preempt-")
    try:
        onnx = os.path.join(tmp, "m.onnx")
        bounded.run([sys.executable, a.generator, "gpt2", "-o", onnx, "--loss", "--layers", "4",
                     "--dim", "128", "--seq", "64", "--vocab", "256", "--batch", "8"],
                    check=True, capture_output=True)
        plans = {}
        for world in (1, 2):
            plans[world] = os.path.join(tmp, f"m{world}.plan")
            bounded.run([a.fsdp_opt, onnx, "-o", plans[world], f"--world-size={world}"],
                        check=True, capture_output=True)
        refs = {}
        for world in (1, 2):
            log = os.path.join(tmp, f"ref{world}.jsonl")
            w = os.path.join(tmp, f"ref{world}.safetensors")
            cmd = [a.fsdp_run, plans[world], "--steps", str(STEPS), "--quiet", "--log", log,
                   "--save-full", w]
            bounded.run(cmd if world == 1 else MPIRUN + ["-np", "2"] + cmd, check=True,
                        capture_output=True)
            refs[world] = {"weights": w, "losses": losses(log)}
        every = ["--checkpoint-every", "1", "--keep-last", "2"]
        cases = [
            ("1 rank, SIGTERM", 1, "direct", "one", []),
            ("2 ranks mpirun, SIGTERM to one", 2, "mpirun", "one", []),
            ("2 ranks mpirun, SIGUSR1 to one", 2, "mpirun", "one-usr1", []),
            ("2 ranks mpirun, SIGTERM to both", 2, "mpirun", "all", []),
            ("2 ranks mpirun, SIGTERM to mpirun", 2, "mpirun", "launcher", []),
            ("2 ranks mpirun, saving every step, SIGTERM to one", 2, "mpirun", "one", every),
            ("2 ranks mpirun, saving every step, two signals", 2, "mpirun", "twice", every),
            ("1 rank, saving every step, two signals", 1, "direct", "twice", every),
            ("2 ranks mpirun, async saves every step, SIGTERM to one", 2, "mpirun", "one",
             every + ["--checkpoint-async"]),
            ("2 ranks mpirun, async saves every step, two signals", 2, "mpirun", "twice",
             every + ["--checkpoint-async"]),
            ("2 ranks torchrun, SIGTERM to one", 2, "torchrun", "one", []),
            ("2 ranks torchrun --max-restarts=2, SIGKILL to one", 2, "torchrun", "kill-one",
             ["--checkpoint-every", "3"]),
        ]
        for name, world, kind, how, extra in cases:
            if a.only and a.only not in name:
                continue
            scenario(name, plans[world], world, kind, how, extra, refs[world], tmp, rng,
                     a.fsdp_run)
        # --slurm-requeue: after the save, rank 0 runs `scontrol requeue
        # $SLURM_JOB_ID` (a stand-in scontrol records its arguments).
        name = "1 rank, SIGTERM, --slurm-requeue"
        if not a.only or a.only in name:
            bin_dir = os.path.join(tmp, "bin")
            os.makedirs(bin_dir, exist_ok=True)
            record = os.path.join(tmp, "scontrol.args")
            with open(os.path.join(bin_dir, "scontrol"), "w") as f:
                f.write(f'#!/bin/sh\necho "$@" >> {record}\n')
            os.chmod(os.path.join(bin_dir, "scontrol"), 0o755)
            signalled = scenario(name, plans[1], 1, "direct", "one", ["--slurm-requeue"],
                                 refs[1], tmp, rng, a.fsdp_run,
                                 env={"SLURM_JOB_ID": "4242",
                                      "PATH": bin_dir + ":" + os.environ["PATH"]})
            said = open(record).read().split("\n") if os.path.exists(record) else []
            if said.count("requeue 4242") < 1 or len([l for l in said if l]) > signalled:
                raise SystemExit(f"FAIL {name}: scontrol was called {said}")
            print(f"PASS {name}: scontrol requeue 4242 after each save on a signal")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
