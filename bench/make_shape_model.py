#!/usr/bin/env python3
"""Writes a model's ONNX graph, shape only: f32 weights as external data
pointing into one *sparse* file (no blocks on disk), with the op structure
torch.onnx.export gives examples/gen_model.py's models (opset 17,
do_constant_folding=False).

  llama3-70b  80 layers, d=8192, FFN 28672, vocabulary 128256, 64 query
              heads, 8 KV heads (about 282 GB of f32 weights)
  llama3-8b   32 layers, d=4096, FFN 14336, vocabulary 128256, 32 query
              heads, 8 KV heads
  gpt2-1.5b   GPT-2 XL: 48 layers, d=1600, 25 heads, vocabulary 50257,
              tied embeddings, learned positions, LayerNorm, tanh-GELU

Llama: RMSNorm from Pow/ReduceMean/Add/Sqrt/Div/Mul, RoPE from
Slice/Neg/Concat with cos/sin tables built from Range, GQA via
Unsqueeze/Expand/Reshape, an additive causal mask from
ConstantOfShape/Trilu, SiLU as x*Sigmoid(x). GPT-2: LayerNormalization,
biased linears, the fused QKV projection split in three, the tanh-GELU
polynomial.

    make_shape_model.py OUT_DIR [--model llama3-70b] [--seq N] [--batch N]
    (writes OUT_DIR/MODEL.onnx and OUT_DIR/MODEL.bin; never commit them)
"""
import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

CONFIGS = {
    "llama3-70b": dict(L=80, D=8192, FFN=28672, V=128256, H=64, KV=8, seq=2048),
    "llama3-8b": dict(L=32, D=4096, FFN=14336, V=128256, H=32, KV=8, seq=2048),
    "gpt2-1.5b": dict(L=48, D=1600, FFN=6400, V=50257, H=25, KV=25, seq=1024),
    # Llama 2 (Touvron et al. 2023, table 1; the released configs): 13B
    # multi-head, 70B grouped-query with 8 KV heads, a 32000-token vocabulary.
    "llama2-13b": dict(L=40, D=5120, FFN=13824, V=32000, H=40, KV=40, seq=4096),
    "llama2-70b": dict(L=80, D=8192, FFN=28672, V=32000, H=64, KV=8, seq=4096),
}
L, D, FFN, V, H, KV = 80, 8192, 28672, 128256, 64, 8
HD = D // H


def configure(name):
    global L, D, FFN, V, H, KV, HD
    c = CONFIGS[name]
    L, D, FFN, V, H, KV = c["L"], c["D"], c["FFN"], c["V"], c["H"], c["KV"]
    HD = D // H


class Builder:
    def __init__(self, data_name):
        self.nodes, self.inits, self.offset, self.n = [], [], 0, 0
        self.data_name = data_name

    def tmp(self, hint):
        self.n += 1
        return f"/{hint}_{self.n}"

    def node(self, op, inputs, name, n_out=1, **attrs):
        outs = [f"{name}_output_{i}" for i in range(n_out)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=name, **attrs))
        return outs[0] if n_out == 1 else outs

    def const(self, name, array):
        t = numpy_helper.from_array(np.asarray(array), name + "_value")
        return self.node("Constant", [], name, value=t)

    def ints(self, name, values):
        return self.const(name, np.array(values, np.int64))

    def weight(self, name, shape):
        t = TensorProto()
        t.name, t.data_type = name, TensorProto.FLOAT
        t.dims.extend(shape)
        t.data_location = TensorProto.EXTERNAL
        length = int(np.prod(shape)) * 4
        for k, v in (("location", self.data_name), ("offset", str(self.offset)),
                     ("length", str(length))):
            e = t.external_data.add()
            e.key, e.value = k, v
        self.offset += length
        self.inits.append(t)
        return name


def linear(b, x, w, scope):
    wt = b.node("Transpose", [w], f"{scope}/Transpose", perm=[1, 0])
    return b.node("MatMul", [x, wt], f"{scope}/MatMul")


def rmsnorm(b, x, w, scope):
    p = b.node("Pow", [x, b.const(f"{scope}/Constant", np.float32(2.0))], f"{scope}/Pow")
    m = b.node("ReduceMean", [p], f"{scope}/ReduceMean", axes=[-1], keepdims=1)
    a = b.node("Add", [m, b.const(f"{scope}/Constant_1", np.float32(1e-6))], f"{scope}/Add")
    s = b.node("Sqrt", [a], f"{scope}/Sqrt")
    d = b.node("Div", [x, s], f"{scope}/Div")
    return b.node("Mul", [d, w], f"{scope}/Mul")


def rotate(b, x, cos, sin, scope):
    half = HD // 2
    def sl(start, end, tag):
        return b.node("Slice", [x, b.const(f"{scope}/c{tag}s", np.array([start], np.int64)),
                                b.const(f"{scope}/c{tag}e", np.array([end], np.int64)),
                                b.const(f"{scope}/c{tag}a", np.array([-1], np.int64))],
                      f"{scope}/Slice{tag}")
    x1, x2 = sl(0, half, "1"), sl(half, 1 << 62, "2")
    rot = b.node("Concat", [b.node("Neg", [x2], f"{scope}/Neg"), x1], f"{scope}/Concat", axis=-1)
    return b.node("Add", [b.node("Mul", [x, cos], f"{scope}/Mul"),
                          b.node("Mul", [rot, sin], f"{scope}/Mul_1")], f"{scope}/Add")


def heads(b, x, n, B, T, scope):
    r = b.node("Reshape", [x, b.const(f"{scope}/shape", np.array([B, T, n, HD], np.int64))],
               f"{scope}/Reshape")
    return b.node("Transpose", [r], f"{scope}/Transpose_h", perm=[0, 2, 1, 3])


def repeat_kv(b, x, B, T, scope):
    u = b.node("Unsqueeze", [x, b.const(f"{scope}/ax", np.array([2], np.int64))], f"{scope}/Unsqueeze")
    e = b.node("Expand", [u, b.const(f"{scope}/es", np.array([B, KV, H // KV, T, HD], np.int64))],
               f"{scope}/Expand")
    return b.node("Reshape", [e, b.const(f"{scope}/rs", np.array([B, H, T, HD], np.int64))],
                  f"{scope}/Reshape_r")


def causal_mask(b, T):
    return b.node("Trilu", [b.node("ConstantOfShape", [b.ints("/mask/shape", [T, T])],
                                   "/mask/ConstantOfShape",
                                   value=numpy_helper.from_array(np.array([-np.inf], np.float32))),
                            b.const("/mask/k", np.array(1, np.int64))], "/mask/Trilu", upper=1)


def attention(b, q, k, v, mask, B, T, s):
    kt = b.node("Transpose", [k], f"{s}/Transpose_k", perm=[0, 1, 3, 2])
    sc = b.node("Div", [b.node("MatMul", [q, kt], f"{s}/MatMul"),
                        b.const(f"{s}/scale", np.float32(np.sqrt(HD)))], f"{s}/Div")
    pr = b.node("Softmax", [b.node("Add", [sc, mask], f"{s}/Add")], f"{s}/Softmax", axis=-1)
    y = b.node("MatMul", [pr, v], f"{s}/MatMul_1")
    y = b.node("Transpose", [y], f"{s}/Transpose_y", perm=[0, 2, 1, 3])
    return b.node("Reshape", [y, b.ints(f"{s}/ys", [B, T, D])], f"{s}/Reshape_y")


def biased(b, x, p, n_in, n_out, scope):
    y = linear(b, x, b.weight(f"{p}.weight", [n_out, n_in]), scope)
    return b.node("Add", [y, b.weight(f"{p}.bias", [n_out])], f"{scope}/Add")


def layernorm(b, x, p, scope):
    return b.node("LayerNormalization", [x, b.weight(f"{p}.weight", [D]), b.weight(f"{p}.bias", [D])],
                  f"{scope}/LayerNormalization", axis=-1, epsilon=1e-5)


def gelu_tanh(b, x, s):
    c = lambda tag, v: b.const(f"{s}/{tag}", np.float32(v))
    x3 = b.node("Pow", [x, c("three", 3.0)], f"{s}/Pow")
    inner = b.node("Add", [x, b.node("Mul", [x3, c("k", 0.044715)], f"{s}/Mul")], f"{s}/Add")
    t = b.node("Tanh", [b.node("Mul", [inner, c("r", np.sqrt(2 / np.pi))], f"{s}/Mul_1")], f"{s}/Tanh")
    half = b.node("Mul", [x, c("half", 0.5)], f"{s}/Mul_2")
    return b.node("Mul", [half, b.node("Add", [t, c("one", 1.0)], f"{s}/Add_1")], f"{s}/Mul_3")


def build_gpt2(b, ids, B, T):
    pos = b.node("Range", [b.const("/pos/start", np.array(0, np.int64)),
                           b.const("/pos/limit", np.array(T, np.int64)),
                           b.const("/pos/delta", np.array(1, np.int64))], "/pos/Range")
    wte = b.weight("wte.weight", [V, D])
    x = b.node("Add", [b.node("Gather", [wte, ids], "/wte/Gather"),
                       b.node("Gather", [b.weight("wpe.weight", [T, D]), pos], "/wpe/Gather")],
               "/Add")
    mask = causal_mask(b, T)
    for i in range(L):
        s, p = f"/h.{i}", f"h.{i}"
        h = layernorm(b, x, f"{p}.ln_1", f"{s}/ln_1")
        qkv = biased(b, h, f"{p}.attn.c_attn", D, 3 * D, f"{s}/attn/c_attn")
        q, k, v = b.node("Split", [qkv, b.ints(f"{s}/attn/split", [D, D, D])], f"{s}/attn/Split",
                         n_out=3, axis=-1)
        q, k, v = (heads(b, t, H, B, T, f"{s}/attn/{n}") for t, n in ((q, "q"), (k, "k"), (v, "v")))
        y = attention(b, q, k, v, mask, B, T, f"{s}/attn")
        x = b.node("Add", [x, biased(b, y, f"{p}.attn.c_proj", D, D, f"{s}/attn/c_proj")], f"{s}/Add")
        h = layernorm(b, x, f"{p}.ln_2", f"{s}/ln_2")
        m = gelu_tanh(b, biased(b, h, f"{p}.mlp.c_fc", D, FFN, f"{s}/mlp/c_fc"), f"{s}/mlp/gelu")
        x = b.node("Add", [x, biased(b, m, f"{p}.mlp.c_proj", FFN, D, f"{s}/mlp/c_proj")], f"{s}/Add_1")
    h = layernorm(b, x, "ln_f", "/ln_f")
    return linear(b, h, wte, "/lm_head")  # tied to the token embedding


def build(out_dir, model, B, T):
    configure(model)
    data = f"{model}.bin"
    b = Builder(data)
    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", T])
    if model.startswith("gpt2"):
        logits = build_gpt2(b, "input_ids", B, T)
    else:
        logits = build_llama(b, B, T)
    write(out_dir, model, b, ids, logits, data)


def build_llama(b, B, T):
    # RoPE tables and the causal mask, built from shapes as torch exports them.
    ar = b.node("Range", [b.const("/rope/c0", np.float32(0)), b.const("/rope/c1", np.float32(HD)),
                          b.const("/rope/c2", np.float32(2))], "/rope/Range")
    inv = b.node("Reciprocal", [b.node("Pow", [b.const("/rope/base", np.float32(10000.0)),
                b.node("Div", [ar, b.const("/rope/hd", np.float32(HD))], "/rope/Div")],
                "/rope/Pow")], "/rope/Reciprocal")
    t = b.node("Range", [b.const("/rope/t0", np.float32(0)), b.const("/rope/t1", np.float32(T)),
                         b.const("/rope/t2", np.float32(1))], "/rope/Range_t")
    fr = b.node("Mul", [b.node("Unsqueeze", [t, b.const("/rope/a1", np.array([1], np.int64))], "/rope/U1"),
                        b.node("Unsqueeze", [inv, b.const("/rope/a0", np.array([0], np.int64))], "/rope/U0")],
                "/rope/Mul")
    emb = b.node("Concat", [fr, fr], "/rope/Concat", axis=-1)
    cos = b.node("Cos", [emb], "/rope/Cos")
    sin = b.node("Sin", [emb], "/rope/Sin")
    mask = causal_mask(b, T)

    x = b.node("Gather", [b.weight("embed_tokens.weight", [V, D]), "input_ids"], "/embed_tokens/Gather")
    for i in range(L):
        s = f"/layers.{i}"
        p = f"layers.{i}"
        h = rmsnorm(b, x, b.weight(f"{p}.input_layernorm.weight", [D]), f"{s}/input_layernorm")
        q = heads(b, linear(b, h, b.weight(f"{p}.self_attn.q_proj.weight", [H * HD, D]), f"{s}/self_attn/q_proj"), H, B, T, f"{s}/self_attn/q")
        k = heads(b, linear(b, h, b.weight(f"{p}.self_attn.k_proj.weight", [KV * HD, D]), f"{s}/self_attn/k_proj"), KV, B, T, f"{s}/self_attn/k")
        v = heads(b, linear(b, h, b.weight(f"{p}.self_attn.v_proj.weight", [KV * HD, D]), f"{s}/self_attn/v_proj"), KV, B, T, f"{s}/self_attn/v")
        q, k = rotate(b, q, cos, sin, f"{s}/self_attn/rq"), rotate(b, k, cos, sin, f"{s}/self_attn/rk")
        k, v = repeat_kv(b, k, B, T, f"{s}/self_attn/kk"), repeat_kv(b, v, B, T, f"{s}/self_attn/vv")
        y = attention(b, q, k, v, mask, B, T, f"{s}/self_attn")
        x = b.node("Add", [x, linear(b, y, b.weight(f"{p}.self_attn.o_proj.weight", [D, H * HD]), f"{s}/self_attn/o_proj")], f"{s}/Add")
        h = rmsnorm(b, x, b.weight(f"{p}.post_attention_layernorm.weight", [D]), f"{s}/post_attention_layernorm")
        g = linear(b, h, b.weight(f"{p}.mlp.gate_proj.weight", [FFN, D]), f"{s}/mlp/gate_proj")
        g = b.node("Mul", [g, b.node("Sigmoid", [g], f"{s}/mlp/Sigmoid")], f"{s}/mlp/Mul")
        u = linear(b, h, b.weight(f"{p}.mlp.up_proj.weight", [FFN, D]), f"{s}/mlp/up_proj")
        m = b.node("Mul", [g, u], f"{s}/mlp/Mul_1")
        x = b.node("Add", [x, linear(b, m, b.weight(f"{p}.mlp.down_proj.weight", [D, FFN]), f"{s}/mlp/down_proj")], f"{s}/Add_1")
    h = rmsnorm(b, x, b.weight("norm.weight", [D]), "/norm")
    return linear(b, h, b.weight("lm_head.weight", [V, D]), "/lm_head")


def write(out_dir, name, b, ids, logits, data):
    T = ids.type.tensor_type.shape.dim[1].dim_value
    out = helper.make_tensor_value_info(logits, TensorProto.FLOAT, ["batch", T, V])
    graph = helper.make_graph(b.nodes, name, [ids], [out], b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, f"{name}.onnx"), "wb") as f:
        f.write(model.SerializeToString())
    with open(os.path.join(out_dir, data), "wb") as f:
        f.truncate(b.offset)  # sparse: no blocks are written
    params = b.offset // 4
    print(f"wrote {out_dir}/{name}.onnx: {len(b.nodes)} nodes, {len(b.inits)} "
          f"initializers, {params / 1e9:.2f} B parameters, sparse data file of "
          f"{b.offset / 2**30:.1f} GiB")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dir")
    ap.add_argument("--model", choices=sorted(CONFIGS), default="llama3-70b")
    ap.add_argument("--seq", type=int, default=0, help="default: the model's")
    ap.add_argument("--batch", type=int, default=1)
    a = ap.parse_args()
    build(a.out_dir, a.model, a.batch, a.seq or CONFIGS[a.model]["seq"])
