"""The reliability suite's classes of bad input and faults (run.py runs
them): each adds its cases to the Suite, each case an argv, what it must
do and, for those that succeed, its own check."""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

from harness import Result, run, digest, copy_ck, edit_manifest, Mount, INPUTS, PY, MPIRUN


# ------------------------------------------------------------------ classes

def links_and_special_files(s):
    cls = "1 links, FIFOs, devices"
    run_ = s.tool("fsdp-run")
    orig = s.p("ext", "weights.orig")
    shutil.copy(s.p("ext", "weights.bin"), orig)
    with open(s.p("secret.bin"), "wb") as f:
        f.write(b"secret" * 16)

    def swap(kind):
        w = s.p("ext", "weights.bin")
        os.remove(w)
        if kind == "symlink":
            os.symlink("../secret.bin", w)
        elif kind == "hardlink":
            os.link(orig, w)
        elif kind == "fifo":
            os.mkfifo(w)
        elif kind == "dirlink":
            pass
        else:
            shutil.copy(orig, w)

    swap("symlink")
    s.case(cls, "external data swapped for a symlink after compiling",
           [run_, s.p("ext.plan"), "--steps", "1", "--quiet", "--save-full", s.p("out1.safetensors")],
           match=r"weights\.bin.*(symlink|link)", protect=[s.p("secret.bin")],
           check=None)
    if os.path.exists(s.p("out1.safetensors")):
        s.failures.append(f"{cls}: --save-full exported the outside file")
    swap("hardlink")
    s.case(cls, "external data a hard link", [run_, s.p("ext.plan"), "--steps", "1", "--quiet"],
           match=r"weights\.bin.*link")
    swap("fifo")
    s.case(cls, "external data a FIFO", [run_, s.p("ext.plan"), "--steps", "1", "--quiet"],
           match=r"weights\.bin.*regular file", timeout=20)
    swap("plain")
    s.case(cls, "the plan itself /dev/zero", [run_, "/dev/zero", "--steps", "1"],
           match=r"/dev/zero", timeout=20)
    s.case(cls, "--weights /dev/zero", [run_, s.p("g.plan"), "--weights", "/dev/zero", "--steps", "1"],
           match=r"/dev/zero", timeout=20)
    s.case(cls, "fsdp-opt /dev/zero", [s.tool("fsdp-opt"), "/dev/zero", "-o", s.p("z.plan")],
           match=r"/dev/zero", timeout=20)
    s.case(cls, "fsdp-inspect /dev/urandom", [s.tool("fsdp-inspect"), "/dev/urandom"],
           match=r"/dev/urandom", timeout=20)
    os.mkfifo(s.p("pipe.onnx"))
    s.case(cls, "fsdp-opt on a FIFO", [s.tool("fsdp-opt"), s.p("pipe.onnx"), "-o", s.p("z.plan")],
           match=r"pipe\.onnx", timeout=20)
    os.mkfifo(s.p("pipe.bin"))
    s.case(cls, "--data a FIFO (.bin)",
           [run_, s.p("g.plan"), "--data", s.p("pipe.bin"), "--seq-len", "8", "--steps", "1"],
           match=r"pipe\.bin", timeout=20)
    os.mkfifo(s.p("pipe.npz"))
    s.case(cls, "--data a FIFO (.npz)",
           [run_, s.p("mlp.plan"), "--data", s.p("pipe.npz"), "--steps", "1"],
           match=r"pipe\.npz", timeout=20)
    fifo_ck = copy_ck(s, "fifo-ck", "ck")
    step = open(os.path.join(fifo_ck, "latest")).read().strip()
    man = os.path.join(fifo_ck, step, "manifest.json")
    os.remove(man)
    os.mkfifo(man)
    s.case(cls, "a checkpoint manifest that is a FIFO",
           [run_, s.p("g.plan"), "--steps", "3", "--resume", fifo_ck, "--quiet"],
           match=r"manifest\.json", timeout=20)
    os.symlink(s.p("w.safetensors"), s.p("wlink.safetensors"))
    s.case(cls, "--weights through a link the user named (followed)",
           [run_, s.p("g.plan"), "--weights", s.p("wlink.safetensors"), "--steps", "1", "--quiet"],
           expect="ok")
    # A traced model's weights are named by its MLIR (fsdp.source) and the
    # plan: no link below the directory the user named, as external data.
    traced = s.p("traced")
    weights = os.path.join(traced, "t.safetensors")
    os.rename(weights, s.p("t-real.safetensors"))
    os.symlink(s.p("t-real.safetensors"), weights)
    s.case(cls, "the traced model's weights file a symlink",
           [run_, s.p("t.plan"), "--steps", "1", "--quiet", "--save-full", s.p("out2.safetensors")],
           match=r"t\.safetensors.*symlink", protect=[s.p("t-real.safetensors")])
    os.remove(weights)
    os.makedirs(s.p("t-dir"))
    shutil.copy(s.p("t-real.safetensors"), s.p("t-dir", "t.safetensors"))
    with open(os.path.join(traced, "t.mlir")) as f:
        text = f.read().replace('fsdp.source = "t.safetensors"', 'fsdp.source = "sub/t.safetensors"')
    with open(os.path.join(traced, "sub.mlir"), "w") as f:
        f.write(text)
    os.symlink(s.p("t-dir"), os.path.join(traced, "sub"))
    run([s.tool("fsdp-opt"), os.path.join(traced, "sub.mlir"), "-o", s.p("tsub.plan")], cwd=s.tmp)
    s.case(cls, "the traced model's weights under a linked directory",
           [run_, s.p("tsub.plan"), "--steps", "1", "--quiet"],
           match=r"sub.*symlink")
    s.case(cls, "--weights the traced model's file through a link (followed)",
           [run_, s.p("t.plan"), "--weights", os.path.join(traced, "sub", "t.safetensors"),
            "--steps", "1", "--quiet"], expect="ok")


def planted_links(s):
    cls = "2 planted links, temporaries"
    run_ = s.tool("fsdp-run")
    precious = s.p("precious")
    os.makedirs(s.p("pl1"))
    os.symlink("../precious", s.p("pl1", "latest.tmp"))
    s.case(cls, "a link named latest.tmp in the checkpoint directory",
           [run_, s.p("mlp.plan"), "--steps", "2", "--checkpoint-dir", s.p("pl1"),
            "--checkpoint-every", "2", "--quiet"],
           expect="ok", protect=[precious],
           check=lambda r: None if open(s.p("pl1", "latest")).read().strip() == "step-2"
           else "latest is not step-2")
    os.makedirs(s.p("pl2"))
    os.symlink("../precious", s.p("pl2", "latest"))
    s.case(cls, "`latest` itself a link", [run_, s.p("mlp.plan"), "--steps", "2", "--checkpoint-dir",
                                           s.p("pl2"), "--checkpoint-every", "2", "--quiet"],
           match=r"latest", protect=[precious])
    os.makedirs(s.p("pl3", "step-2"))
    os.symlink("../../precious", s.p("pl3", "step-2", "manifest.json.tmp"))
    s.case(cls, "a link named manifest.json.tmp in step-2",
           [run_, s.p("mlp.plan"), "--steps", "2", "--checkpoint-dir", s.p("pl3"),
            "--checkpoint-every", "2", "--quiet"],
           expect="ok", protect=[precious])
    os.symlink(precious, s.p("full.safetensors"))
    s.case(cls, "--save-full onto a link", [run_, s.p("mlp.plan"), "--steps", "1", "--save-full",
                                            s.p("full.safetensors"), "--quiet"],
           match=r"full\.safetensors", protect=[precious, s.p("full.safetensors")])
    os.symlink(precious, s.p("grads.safetensors"))
    s.case(cls, "--dump-grads onto a link", [run_, s.p("mlp.plan"), "--steps", "1", "--dump-grads",
                                             s.p("grads.safetensors"), "--quiet"],
           match=r"grads\.safetensors", protect=[precious])
    os.symlink(precious, s.p("linked.plan"))
    s.case(cls, "fsdp-opt -o onto a link", [s.tool("fsdp-opt"), s.p("mlp.onnx"), "-o", s.p("linked.plan")],
           match=r"linked\.plan", protect=[precious])
    os.symlink(precious, s.p("fitted.json"))
    with open(s.p("cpu.json"), "w") as f:
        json.dump({"name": "cpu", "cores": 2, "threads": 2, "op_scale": {}}, f)
    s.case(cls, "fsdp-inspect --fit-out onto a link",
           [s.tool("fsdp-inspect"), s.p("g.plan"), "--compare", s.p("trace.json"),
            "--fit-device", s.p("cpu.json"), "--fit-out", s.p("fitted.json")],
           match=r"fitted\.json", protect=[precious])
    if s.root:
        run(["mknod", s.p("nulldev"), "c", "1", "3"])
        s.case(cls, "--save-full onto a device node", [run_, s.p("mlp.plan"), "--steps", "1",
                                                       "--save-full", s.p("nulldev"), "--quiet"],
               match=r"nulldev", protect=[s.p("nulldev")])
    else:
        s.skip(cls, "--save-full onto a device node", "not root")
    s.case(cls, "no temporary is left behind by the refusals", expect="ok",
           action=lambda: Result(0, "", ""),
           check=lambda r: None if not [n for n in os.listdir(s.tmp) if ".tmp" in n]
           else "left: " + ", ".join(n for n in os.listdir(s.tmp) if ".tmp" in n))


def crafted_headers(s):
    cls = "3 crafted headers, unbounded reads"
    run_ = s.tool("fsdp-run")
    for name, why in [("wrap", "shape too large|wrong number of bytes"),
                      ("word", "not a non-negative integer"),
                      ("long", "not a non-negative integer"),
                      ("negative", "not a non-negative integer"),
                      ("cut", "truncated")]:
        s.case(cls, f".npz {name}", [run_, s.p("mlp.plan"), "--data", s.p("data", f"{name}.npz"),
                                     "--steps", "1"], match=f"{name}\\.npz.*({why})", timeout=30)
    s.case(cls, ".bin header claims 2^31 tokens in 20 bytes",
           [run_, s.p("g.plan"), "--data", s.p("data", "lying.bin"), "--seq-len", "8", "--steps", "1"],
           match=r"lying\.bin: holds fewer tokens", timeout=30)
    with open(s.p("st-huge.safetensors"), "wb") as f:
        f.write((2**62).to_bytes(8, "little") + b"{}")
    s.case(cls, "safetensors header length 2^62",
           [run_, s.p("g.plan"), "--weights", s.p("st-huge.safetensors"), "--steps", "1"],
           match=r"st-huge\.safetensors", timeout=30)
    hdr = json.dumps({"wte.weight": {"dtype": "F32", "shape": [2**40, 2**40],
                                     "data_offsets": [0, 16]}}).encode()
    with open(s.p("st-shape.safetensors"), "wb") as f:
        f.write(len(hdr).to_bytes(8, "little") + hdr + b"\0" * 16)
    s.case(cls, "safetensors shape whose size overflows",
           [run_, s.p("g.plan"), "--weights", s.p("st-shape.safetensors"), "--steps", "1"],
           match=r"st-shape\.safetensors", timeout=30)
    with open(s.p("trunc.plan"), "w") as f:
        f.write(open(s.p("g.plan")).read()[:300])
    s.case(cls, "a truncated plan", [run_, s.p("trunc.plan")], match=r"trunc\.plan")


def nonfinite(s):
    cls = "4 NaN and inf"
    run_ = s.tool("fsdp-run")
    ck = s.p("nf-ck")
    s.case(cls, "a NaN in the data stops the run, no checkpoint after it",
           [run_, s.p("mlp.plan"), "--steps", "6", "--data", s.p("nan.npz"), "--checkpoint-dir", ck,
            "--checkpoint-every", "1", "--quiet"],
           match=r"step \d+.*(non-finite|nan|NaN)",
           check=None)
    s.case(cls, "the last checkpoint committed before the NaN is finite", expect="ok",
           action=lambda: Result(0, "", ""),
           check=lambda _: None if all(
               run([PY, "-c", "import sys,struct,json,math\n"
                    "b=open(sys.argv[1],'rb').read();n=struct.unpack('<Q',b[:8])[0];"
                    "import array;a=array.array('f');a.frombytes(b[8+n:]);"
                    "sys.exit(0 if all(math.isfinite(x) for x in a) else 1)",
                    os.path.join(ck, d, f)]).rc == 0
               for d in os.listdir(ck) if d.startswith("step-")
               for f in os.listdir(os.path.join(ck, d)) if f.endswith(".safetensors"))
           else "a committed shard holds a non-finite value")
    s.case(cls, "--on-nonfinite=skip trains on and counts the skip",
           [run_, s.p("mlp.plan"), "--steps", "5", "--data", s.p("nan.npz"), "--on-nonfinite=skip",
            "--log", s.p("skip.jsonl"), "--quiet"], expect="ok",
           check=lambda r: None if any(json.loads(l).get("skipped_updates", 0) >= 1
                                       for l in open(s.p("skip.jsonl")) if l.strip())
           else "no skipped update in the log")
    run([PY, os.path.join(INPUTS, "nonfinite.py"), "poison", s.p("w.safetensors"), s.p("nanw.safetensors")])
    s.case(cls, "NaN weights", [run_, s.p("g.plan"), "--weights", s.p("nanw.safetensors"), "--steps", "1"],
           match=r"nanw\.safetensors.*non-finite")
    ck2 = copy_ck(s, "nf-ck2", "ck")
    step = open(os.path.join(ck2, "latest")).read().strip()
    shard = os.path.join(ck2, step, "rank-00000.safetensors")
    run([PY, os.path.join(INPUTS, "nonfinite.py"), "poison", shard, shard + ".p"])
    os.replace(shard + ".p", shard)
    s.case(cls, "resuming from a poisoned shard", [run_, s.p("g.plan"), "--steps", "4", "--resume", ck2],
           match=r"rank-00000\.safetensors.*non-finite", protect=[ck2])
    with open(s.p("big.npz.py"), "w") as f:
        f.write("import numpy as np,sys\nnp.savez(sys.argv[1], x=np.full((4,64),1e30,np.float32),"
                " targets=np.zeros((4,32),np.float32))\n")
    run([PY, s.p("big.npz.py"), s.p("big.npz")])
    s.case(cls, "inputs of 1e30 (an inf loss)", [run_, s.p("mlp.plan"), "--steps", "3", "--data",
                                                 s.p("big.npz"), "--save-full", s.p("big.safetensors")],
           match=r"step 1.*(non-finite|inf)")
    if os.path.exists(s.p("big.safetensors")):
        s.failures.append(f"{cls}: --save-full wrote a model after a non-finite loss")


def manifests(s):
    cls = "5 checkpoint manifests"
    run_ = s.tool("fsdp-run")
    for name, field, value, why in [
            ("neg", "step", "-5", "not a training position"),
            ("huge", "step", str(2**62), "past --steps"),
            ("wrap", "step", str(2**64 - 1), "integer of 64 bits"),
            ("seed", "seed", '"x"', "seed: expected"),
            ("skip", "skipped_updates", "9", "not a training position"),
            ("shape", "params.layers.0.weight.shape", '"a"', "shape: expected an array"),
            ("begin", "params.layers.0.weight.pieces.0.begin", '"0"', "begin: expected an integer"),
            ("file", "params.layers.0.weight.pieces.0.file", "3", "file: expected a string"),
            ("dotdot", "params.layers.0.weight.pieces.0.file", '"../x.safetensors"', "not a file of"),
            ("overlap", "params.layers.0.weight.pieces",
             '[{"file": "rank-00000.safetensors", "begin": 0, "count": 100}, '
             '{"file": "rank-00000.safetensors", "begin": 50, "count": 100}]', "overlap"),
            ("gap", "params.layers.0.weight.pieces",
             '[{"file": "rank-00000.safetensors", "begin": 0, "count": 10}]',
             "covers 10 of|wrong size"),
            ("params", "params", "[]", "params: expected an object"),
            ("optimizer", "optimizer", '"sgd"', "saved with optimizer"),
            ("version", "version", "7", "not a version 2")]:
        d = edit_manifest(s, f"man-{name}", field, value)
        s.case(cls, f"{field} = {value[:40]}",
               [run_, s.p("mlp.plan"), "--steps", "3", "--resume", d, "--quiet"],
               match=why, protect=[d])
    d = copy_ck(s, "man-garbage")
    step = open(os.path.join(d, "latest")).read().strip()
    with open(os.path.join(d, step, "manifest.json"), "w") as f:
        f.write('{"format": "fsdp-checkpoint", "version": 2, "step": [1,2]')
    s.case(cls, "truncated JSON", [run_, s.p("mlp.plan"), "--steps", "3", "--resume", d, "--quiet"],
           match=r"manifest\.json")
    d = copy_ck(s, "man-latest")
    with open(os.path.join(d, "latest"), "w") as f:
        f.write("../../etc\n")
    s.case(cls, "`latest` naming a directory outside",
           [run_, s.p("mlp.plan"), "--steps", "3", "--resume", d, "--quiet"], match=r"latest")
    s.case(cls, "the untouched checkpoint still resumes",
           [run_, s.p("mlp.plan"), "--steps", "3", "--resume", copy_ck(s, "man-ok"), "--quiet"],
           expect="ok")


def shared_directory(s):
    cls = "6 two jobs, one directory"
    run_ = s.tool("fsdp-run")
    d = s.p("shared-ck")
    first = subprocess.Popen([run_, s.p("mlp.plan"), "--steps", "100000", "--checkpoint-dir", d,
                              "--checkpoint-every", "1000", "--quiet"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 30
    while time.time() < deadline and not os.path.exists(os.path.join(d, ".lock")):
        time.sleep(0.05)
    time.sleep(0.3)
    s.case(cls, "a second job on a directory in use",
           [run_, s.p("mlp.plan"), "--steps", "2", "--checkpoint-dir", d, "--quiet"],
           match=rf"shared-ck.*(in use|held|lock).*pid {first.pid}")
    s.case(cls, "a second job resuming from it",
           [run_, s.p("mlp.plan"), "--steps", "2", "--checkpoint-dir", d, "--resume", d, "--quiet"],
           match=r"shared-ck.*(in use|held|lock)")
    first.send_signal(signal.SIGKILL)
    first.wait()
    s.case(cls, "after the holder died, the directory is free again",
           [run_, s.p("mlp.plan"), "--steps", "2", "--checkpoint-dir", d, "--checkpoint-every", "2",
            "--quiet"], expect="ok")


def compiler_output(s):
    cls = "7 fsdp-opt output"
    opt = s.tool("fsdp-opt")
    shutil.copy(s.p("mlp.onnx"), s.p("same.onnx"))
    s.case(cls, "-o the input itself", [opt, s.p("same.onnx"), "-o", s.p("same.onnx")],
           match=r"same\.onnx", protect=[s.p("same.onnx")])
    if not s.root:
        s.skip(cls, "full and read-only disks", "not root: no tmpfs")
        return
    m = s.p("mnt-opt")
    try:
        with Mount(m, "1m") as mnt:
            shutil.copy(s.p("mlp.plan"), os.path.join(m, "prev.plan"))
            mnt.fill()
            s.case(cls, "a full disk keeps the previous plan",
                   [opt, s.p("g.onnx"), "-o", os.path.join(m, "prev.plan")],
                   match=r"prev\.plan.*(space|No space)", protect=[os.path.join(m, "prev.plan")])
            s.case(cls, "no temporary left on the full disk", expect="ok",
                   action=lambda: Result(0, "", ""),
                   check=lambda r: None if sorted(os.listdir(m)) == ["filler", "prev.plan"]
                   else "left: " + ", ".join(os.listdir(m)))
            mnt.remount_ro()
            s.case(cls, "a read-only disk", [opt, s.p("g.onnx"), "-o", os.path.join(m, "prev.plan")],
                   match=r"prev\.plan.*(read-only|Read-only)", protect=[os.path.join(m, "prev.plan")])
    except OSError as e:
        s.skip(cls, "full and read-only disks", f"tmpfs: {e}")


def plan_integrity(s):
    cls = "8 edited plans"
    run_ = s.tool("fsdp-run")
    good = json.load(open(s.p("g.plan")))

    def write(name, plan, reseal):
        path = s.p(name)
        with open(path, "w") as f:
            json.dump(plan, f, indent=1)
        if reseal:
            run([PY, os.path.join(INPUTS, "reseal.py"), path])
        return path

    p = json.loads(json.dumps(good))
    del p["program"][3]
    s.case(cls, "a deleted instruction", [run_, write("del.plan", p, False), "--steps", "1"],
           match=r"del\.plan.*digest")
    p = json.loads(json.dumps(good))
    for ins in p["program"]:
        for t in ins.get("out", []):
            if t.get("space") == "arena":
                t["offset"] = t.get("offset", 0) + 1
                break
        else:
            continue
        break
    s.case(cls, "a misaligned arena offset (sealed again)",
           [run_, write("align.plan", p, True), "--steps", "1"], match=r"align\.plan")
    text = open(s.p("g2.plan")).read()
    for name, old, new in [("reduction", '"reduction": "avg"', '"reduction": "max"'),
                           ("strategy", '"strategy": "full-shard"', '"strategy": "zzz"'),
                           ("approximate", '"approximate": "tanh"', '"approximate": "zzz"'),
                           ("optimizer", '"optimizer": "adamw"', '"optimizer": "lion"')]:
        path = s.p(f"enum-{name}.plan")
        with open(path, "w") as f:
            f.write(text.replace(old, new))
        run([PY, os.path.join(INPUTS, "reseal.py"), path])
        s.case(cls, f"{name} not one of its choices (sealed again)", [run_, path, "--steps", "1"],
               match=rf"enum-{name}\.plan.*not one of")
    p = json.loads(json.dumps(good))
    p["program"][0]["in"][0]["shape"] = [3, 3]
    s.case(cls, "an operand's shape (sealed again)",
           [run_, write("shape.plan", p, True), "--steps", "1"], match=r"shape")
    p = json.loads(json.dumps(good))
    p["meta"]["world_size"] = 3
    s.case(cls, "world size edited (sealed again)", [run_, write("world.plan", p, True), "--steps", "1"],
           match=r"world|ranks")
    s.case(cls, "fsdp-inspect on an edited plan", [s.tool("fsdp-inspect"), s.p("del.plan")],
           match=r"del\.plan.*digest")


def rank_agreement(s):
    cls = "9 options across ranks"
    if not s.mpirun:
        s.skip(cls, "all", "no mpirun")
        return
    run_ = s.tool("fsdp-run")

    def mpmd(a, b):
        return MPIRUN + ["-np", "1", run_, s.p("g2.plan"), "--quiet", "--comm-timeout", "30"] + a + \
            [":", "-np", "1", run_, s.p("g2.plan"), "--quiet", "--comm-timeout", "30"] + b
    s.case(cls, "--steps differs", mpmd(["--steps", "2"], ["--steps", "3"]),
           match=r"--steps.*rank", timeout=90)
    s.case(cls, "--checkpoint-every differs",
           mpmd(["--steps", "2", "--checkpoint-dir", s.p("ra1"), "--checkpoint-every", "1"],
                ["--steps", "2", "--checkpoint-dir", s.p("ra1"), "--checkpoint-every", "2"]),
           match=r"--checkpoint-every.*rank", timeout=90)
    s.case(cls, "--weights differs", mpmd(["--steps", "2", "--weights", s.p("w.safetensors")],
                                          ["--steps", "2"]),
           match=r"--weights.*rank", timeout=90)
    s.case(cls, "--resume on one rank only", mpmd(["--steps", "3", "--resume", s.p("ck")],
                                                  ["--steps", "3"]),
           match=r"--resume.*rank", timeout=90)
    s.case(cls, "the same options train", mpmd(["--steps", "2"], ["--steps", "2"]), expect="ok",
           timeout=90)


def failing_writes(s):
    cls = "10 writes that fail"
    run_ = s.tool("fsdp-run")
    s.case(cls, "--log /dev/full", [run_, s.p("mlp.plan"), "--steps", "2", "--log", "/dev/full"],
           match=r"/dev/full")
    s.case(cls, "fsdp-inspect --html /dev/full",
           [s.tool("fsdp-inspect"), s.p("g.plan"), "--html", "/dev/full"], match=r"/dev/full")
    s.case(cls, "fsdp-inspect --trace /dev/full",
           [s.tool("fsdp-inspect"), s.p("g.plan"), "--trace", "/dev/full"], match=r"/dev/full")
    ck = copy_ck(s, "log-ck")
    log = s.p("resume.jsonl")
    run([run_, s.p("mlp.plan"), "--steps", "2", "--log", log, "--quiet"])
    before = open(log).read()
    s.case(cls, "--resume with the same --log appends",
           [run_, s.p("mlp.plan"), "--steps", "4", "--resume", ck, "--log", log, "--quiet"],
           expect="ok", check=lambda r: None if open(log).read().startswith(before)
           and len(open(log).read()) > len(before) else "the earlier history was lost")
    if not s.root:
        s.skip(cls, "full and read-only disks", "not root: no tmpfs")
        return
    m = s.p("mnt-run")
    try:
        with Mount(m, "1m") as mnt:
            mnt.fill()
            s.case(cls, "a log on a full disk",
                   [run_, s.p("mlp.plan"), "--steps", "50", "--log", os.path.join(m, "l.jsonl")],
                   match=r"l\.jsonl.*(space|No space)")
            s.case(cls, "checkpoints on a full disk are refused at start-up",
                   [run_, s.p("mlp.plan"), "--steps", "2", "--checkpoint-dir", os.path.join(m, "ck"),
                    "--checkpoint-every", "1"], match=r"ck.*(space|No space)")
        with Mount(m, "4m") as mnt:
            shutil.copytree(s.p("mck"), os.path.join(m, "ck"))
            mnt.remount_ro()
            s.case(cls, "a read-only checkpoint directory is found at start-up",
                   [run_, s.p("mlp.plan"), "--steps", "3", "--checkpoint-dir", os.path.join(m, "ck"),
                    "--checkpoint-every", "1", "--resume", os.path.join(m, "ck")],
                   match=r"ck.*(read-only|Read-only)", protect=[os.path.join(m, "ck")])
            s.case(cls, "--save-full on a read-only disk",
                   [run_, s.p("mlp.plan"), "--steps", "1", "--save-full", os.path.join(m, "w.safetensors")],
                   match=r"w\.safetensors.*(read-only|Read-only)")
        with Mount(m, "1m") as mnt:
            # The last write of a trace or page fails on a full disk: an
            # error, not exit 0 (they were checked before the close).
            mnt.fill()
            s.case(cls, "fsdp-inspect --html on a full disk",
                   [s.tool("fsdp-inspect"), s.p("g.plan"), "--html", os.path.join(m, "p.html")],
                   match=r"p\.html.*(space|No space)")
            s.case(cls, "fsdp-inspect --trace on a full disk",
                   [s.tool("fsdp-inspect"), s.p("g.plan"), "--trace", os.path.join(m, "t.json")],
                   match=r"t\.json.*(space|No space)")
            s.case(cls, "fsdp-run --trace on a full disk",
                   [run_, s.p("mlp.plan"), "--steps", "1", "--quiet", "--trace",
                    os.path.join(m, "m.json")], match=r"m\.json.*(space|No space)")
        with Mount(m, "4m") as mnt:
            # A disk that fills during the run: the commit fails with the
            # cause, `latest` keeps the last good checkpoint, no temporaries.
            shutil.copytree(s.p("mck"), os.path.join(m, "ck"))
            latest = open(os.path.join(m, "ck", "latest")).read()
            mnt.fill()
            s.case(cls, "a disk that is full at the next save",
                   [run_, s.p("mlp.plan"), "--steps", "4", "--checkpoint-dir", os.path.join(m, "ck"),
                    "--checkpoint-every", "1", "--resume", os.path.join(m, "ck")],
                   match=r"(space|No space)", protect=[os.path.join(m, "ck", "latest"),
                                                       os.path.join(m, "ck", latest.strip())])
            s.case(cls, "no temporary left in the checkpoint directory", expect="ok",
                   action=lambda: Result(0, "", ""),
                   check=lambda r: None if not [n for n in os.listdir(os.path.join(m, "ck"))
                                                if ".tmp" in n] else "temporaries left")
    except OSError as e:
        s.skip(cls, "full and read-only disks", f"tmpfs: {e}")


def flags(s):
    cls = "11 flags"
    opt, run_ = s.tool("fsdp-opt"), s.tool("fsdp-run")
    for flag, name in [("--lr=nan", "--lr"), ("--lr=inf", "--lr"), ("--lr=-1", "--lr"),
                       ("--grad-clip=nan", "--grad-clip"), ("--momentum=inf", "--momentum"),
                       ("--weight-decay=-1", "--weight-decay"), ("--weight-decay=nan", "--weight-decay"),
                       ("--gpus-per-node=-1", "--gpus-per-node"), ("--world-size=0", "world-size"),
                       ("--strategy=zero4", "strategy"), ("--batch-size=-3", "batch"),
                       ("--wrap=regex:(", "regex"), ("--frozen=.*", "frozen|nothing to train")]:
        s.case(cls, f"fsdp-opt {flag}", [opt, s.p("mlp.onnx"), "-o", s.p("flag.plan"), flag],
               match=re.escape(name) if name.startswith("--") else name)
    def first_step_of_a_long_run():
        # 10^10 steps is a long run, not an abort in `reserve`: the first
        # step trains and logs.
        p = subprocess.Popen([run_, s.p("mlp.plan"), "--steps", "10000000000"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            line = p.stdout.readline()
        finally:
            p.kill()
            _, err = p.communicate()
        return Result(0 if line.startswith("step 1/10000000000") else 1, line, err)
    s.case(cls, "fsdp-run --steps 10000000000 starts", expect="ok", action=first_step_of_a_long_run)
    for argv, name in [(["--comm-timeout", "nan"], "--comm-timeout"),
                       (["--comm-timeout", "0"], "--comm-timeout"),
                       (["--comm-timeout", "-1"], "--comm-timeout"),
                       (["--steps", "-1"], "--steps"),
                       (["--checkpoint-every", "2"], "--checkpoint-dir"),
                       (["--keep-last", "2"], "--checkpoint-dir"),
                       (["--seq-len", "8", "--data", s.p("nan.npz")], "--seq-len"),
                       (["--on-nonfinite=maybe"], "--on-nonfinite"),
                       (["--resume", s.p("nowhere")], "nowhere")]:
        s.case(cls, "fsdp-run " + " ".join(a.replace(s.tmp + "/", "") for a in argv),
               [run_, s.p("mlp.plan"), "--quiet"] + argv, match=re.escape(name))


def onnx_weights(s):
    cls = "13 --weights from ONNX"
    run_ = s.tool("fsdp-run")
    script = ("import onnx, sys\nfrom onnx import numpy_helper\nm = onnx.load(sys.argv[1])\n"
              "for i, t in enumerate(m.graph.initializer):\n"
              "    if t.name == sys.argv[3]:\n"
              "        a = numpy_helper.to_array(t)\n"
              "        b = a.T.copy() if sys.argv[4] == 'T' else a.reshape(-1)\n"
              "        m.graph.initializer[i].CopyFrom(numpy_helper.from_array(b, t.name))\n"
              "onnx.save(m, sys.argv[2])\n")
    with open(s.p("edit_onnx.py"), "w") as f:
        f.write(script)
    plan = json.load(open(s.p("g.plan")))
    name = next(p["name"] for p in plan["params"] if len(p["shape"]) == 2
                and p["shape"][0] != p["shape"][1])
    for how in ["T", "flat"]:
        r = run([PY, s.p("edit_onnx.py"), s.p("g.onnx"), s.p(f"w-{how}.onnx"), name, how])
        if r.rc != 0:
            s.skip(cls, how, r.err.strip()[:80])
            continue
        s.case(cls, f"{name} {'transposed' if how == 'T' else 'flattened'}",
               [run_, s.p("g.plan"), "--weights", s.p(f"w-{how}.onnx"), "--steps", "1"],
               match=re.escape(name) + r".*shape")
    s.case(cls, "the model's own weights load", [run_, s.p("g.plan"), "--weights", s.p("g.onnx"),
                                                  "--steps", "1", "--quiet"], expect="ok")


def traces(s):
    cls = "14 traces"
    insp = s.tool("fsdp-inspect")
    t = json.load(open(s.p("trace.json")))

    def variant(name, edit):
        d = json.loads(json.dumps(t))
        edit(d)
        path = s.p(f"trace-{name}.json")
        with open(path, "w") as f:
            json.dump(d, f)
        return path

    def first_x(d):
        return next(e for e in d["traceEvents"] if e.get("ph") == "X")
    s.case(cls, "a trace of another plan", [insp, s.p("mlp.plan"), "--compare", s.p("trace.json")],
           match=r"trace\.json.*another plan")
    for name, edit, why in [
            ("negative", lambda d: first_x(d).__setitem__("dur", -5), "dur.*plausible"),
            ("huge", lambda d: first_x(d).__setitem__("ts", 1e300), "ts.*plausible"),
            ("string", lambda d: first_x(d).__setitem__("dur", "5"), "dur.*expected a number"),
            ("nodigest", lambda d: d["otherData"].pop("plan_digest"), "names no plan"),
            ("instr", lambda d: first_x(d).setdefault("args", {}).__setitem__("instruction", -1),
             "instruction"),
            ("events", lambda d: d.__setitem__("traceEvents", [1, 2]), "traceEvents")]:
        s.case(cls, f"trace {name}", [insp, s.p("g.plan"), "--compare", variant(name, edit)],
               match=why)
    s.case(cls, "fit-device on a trace of another plan",
           [insp, s.p("mlp.plan"), "--compare", s.p("trace.json"), "--fit-device", s.p("cpu.json"),
            "--fit-out", s.p("fit2.json")], match=r"another plan")
    s.case(cls, "the plan's own trace compares", [insp, s.p("g.plan"), "--compare", s.p("trace.json")],
           expect="ok")


def rendezvous(s):
    cls = "15 rendezvous without MPI"
    run_ = s.tool("fsdp-run")
    # Below Linux's ephemeral range (32768-60999), where a port can be
    # taken by any process's outgoing connection or Gloo's listeners (two
    # cases failed so, "Address already in use", beside the torch 2.x
    # suites); apart from dp_parity.py's 29600-31700 and the torch 2.x
    # tests' 26741-26860.
    base = 22000 + os.getpid() % 3000

    def launch(world, port, before_rank1=None, extra=None, slurm=False):
        procs = []
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        for r in range(world):
            if slurm:  # srun's variables (no PMIx: no MPI)
                e = dict(env, SLURM_NTASKS=str(world), SLURM_PROCID=str(r), SLURM_LOCALID=str(r))
            else:
                e = dict(env, WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world), RANK=str(r),
                         LOCAL_RANK=str(r))
            e.update((extra or {}).get(r, {}))
            procs.append(subprocess.Popen([run_, s.p("g2.plan"), "--steps", "2", "--quiet",
                                           "--comm-timeout", "20"], env=e,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
            if r == 0 and before_rank1:
                before_rank1(port)  # rank 0 serves the store at MASTER_PORT
        codes, errs, hung = [], [], False
        for p in procs:
            try:
                _, err = p.communicate(timeout=40)
            except subprocess.TimeoutExpired:
                p.kill()
                _, err = p.communicate()
                hung = True
            codes.append(p.returncode)
            errs.append(err)
        if hung:
            return Result(None, "", "\n".join(errs), True)
        return Result(max(codes, key=lambda c: c != 0), "", "\n".join(errs))

    held = []

    def connect(port, payload=None):
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                c = socket.create_connection(("127.0.0.1", port), timeout=1)
                if payload:
                    c.sendall(payload)
                held.append(c)
                return
            except OSError:
                time.sleep(0.05)

    s.case(cls, "Slurm's variables, no MPI", expect="ok",
           action=lambda: launch(2, base + 28, slurm=True))
    s.case(cls, "an idle connection before rank 1", expect="ok",
           action=lambda: launch(2, base, lambda port: connect(port)))
    s.case(cls, "a connection that sends garbage", expect="ok",
           action=lambda: launch(2, base + 4, lambda port: connect(port, b"GET / HTTP/1.0\r\n\r\n")))
    # c10d TCPStore messages that claim too much, or wait forever.
    s.case(cls, "a store key that claims 2^62 bytes", expect="ok",
           action=lambda: launch(2, base + 16, lambda port: connect(
               port, b"\x00" + (2 ** 62).to_bytes(8, "little"))))
    s.case(cls, "a store value over the limit", expect="ok",
           action=lambda: launch(2, base + 20, lambda port: connect(
               port, b"\x00" + (1).to_bytes(8, "little") + b"k" + (2 ** 40).to_bytes(8, "little"))))
    s.case(cls, "a store wait that never ends", expect="ok",
           action=lambda: launch(2, base + 24, lambda port: connect(
               port, b"\x05" + (1).to_bytes(8, "little") + (4).to_bytes(8, "little") + b"nope")))
    s.case(cls, "many idle connections", expect="ok",
           action=lambda: launch(2, base + 8, lambda port: [connect(port) for _ in range(20)]))
    s.case(cls, "a rank of a job of another size",
           action=lambda: launch(2, base + 12, extra={1: {"WORLD_SIZE": "3"}}),
           match=r"rank|WORLD_SIZE|world size")
    for c in held:
        c.close()


def noise(s):
    cls = "16 noise and leftovers"
    opt, run_ = s.tool("fsdp-opt"), s.tool("fsdp-run")
    for flag in ["--world-size=0", "--strategy=zero4", "--wrap=regex:(", "--lr=nan"]:
        s.case(cls, f"fsdp-opt {flag} is one line", expect="ok",
               action=lambda flag=flag: (lambda r: Result(0 if r.rc not in (0, None) else 1, r.out,
                                                          r.err))(
                   run([opt, s.p("g.onnx"), "-o", s.p("n.plan"), flag])),
               check=lambda r: None if len(r.err.strip().splitlines()) <= 2
               else f"{len(r.err.strip().splitlines())} lines")
    d = s.p("keep")
    s.case(cls, "--keep-last 2 keeps two", [run_, s.p("mlp.plan"), "--steps", "5", "--checkpoint-dir", d,
                                            "--checkpoint-every", "1", "--keep-last", "2", "--quiet"],
           expect="ok", check=lambda r: None if sorted(n for n in os.listdir(d) if n.startswith("step-"))
           == ["step-4", "step-5"] else "kept: " + ", ".join(sorted(os.listdir(d))))


CLASSES = {
    "links": links_and_special_files, "planted": planted_links, "headers": crafted_headers,
    "nonfinite": nonfinite, "manifests": manifests, "shared": shared_directory,
    "output": compiler_output, "plans": plan_integrity, "ranks": rank_agreement,
    "writes": failing_writes, "flags": flags, "onnx": onnx_weights, "traces": traces,
    "rendezvous": rendezvous, "noise": noise,
}
