#!/usr/bin/env python3
"""Builds small PyTorch models and exports them with torch.onnx.export.

Run with Debian's interpreter (/usr/bin/python3) and python3-torch 1.13:

    /usr/bin/python3 examples/gen_model.py gpt2 -o gpt2.onnx --opset 17

Models: gpt2 (tied or untied embeddings, LayerNorm, tanh-GELU, causal mask
via tril/masked_fill), llama (RMSNorm, RoPE, SwiGLU, grouped-query
attention), bert (erf-GELU, padding mask as an input, classifier head) and
mlp (Gemm + ReLU), encoder (torch's own nn.TransformerEncoder between an
embedding and a head), vit and resnet18 (torchvision's VisionTransformer
and resnet18, small: --image, --patch, --classes), convnet (1-D and 2-D
convolutions with groups, dilations, unequal strides). --loss puts a loss
inside the graph. Exports use
do_constant_folding=False, as the importer's shape folding is what is
tested. --shapes-json prints the expected input/output shapes.
"""
import argparse
import inspect
import json
import math
import os
import sys
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

warnings.filterwarnings("ignore")


# --------------------------------------------------------------------------
# GPT-2
# --------------------------------------------------------------------------
class GPT2Attention(nn.Module):
    def __init__(self, d, heads, mask_buffer_t=0):
        super().__init__()
        self.heads = heads
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        # --mask-buffer: the causal mask registered in every block, as
        # nanoGPT and minGPT do (torch.onnx.export merges the identical
        # buffers into one initializer named for block 0).
        if mask_buffer_t:
            t = mask_buffer_t
            self.register_buffer("bias", torch.tril(torch.ones(t, t)).view(1, 1, t, t))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        hd = C // self.heads
        q = q.view(B, T, self.heads, hd).transpose(1, 2)
        k = k.view(B, T, self.heads, hd).transpose(1, 2)
        v = v.view(B, T, self.heads, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        if hasattr(self, "bias"):
            mask = self.bias[:, :, :T, :T]
        else:
            mask = torch.tril(torch.ones(T, T, device=x.device)).view(1, 1, T, T)
        att = att.masked_fill(mask == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class GPT2MLP(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.c_fc = nn.Linear(d, 4 * d)
        self.c_proj = nn.Linear(4 * d, d)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class GPT2Block(nn.Module):
    def __init__(self, d, heads, mask_buffer_t=0):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = GPT2Attention(d, heads, mask_buffer_t)
        self.ln_2 = nn.LayerNorm(d)
        self.mlp = GPT2MLP(d)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2(nn.Module):
    def __init__(self, vocab, d, layers, heads, max_t, tied=True, mask_buffer=False,
                 pe_buffer=False):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        if pe_buffer:
            # --pe-buffer: a sinusoidal position table registered as a buffer
            # and added to the embeddings (PyTorch's own examples do this):
            # it is read differentiably, yet PyTorch never trains it.
            pos = torch.arange(max_t).unsqueeze(1)
            div = torch.exp(torch.arange(0, d, 2) * (-math.log(10000.0) / d))
            pe = torch.zeros(max_t, d)
            pe[:, 0::2] = torch.sin(pos * div)
            pe[:, 1::2] = torch.cos(pos * div)
            self.register_buffer("pe", pe)
        else:
            self.wpe = nn.Embedding(max_t, d)
        self.h = nn.ModuleList([GPT2Block(d, heads, max_t if mask_buffer else 0)
                                for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        if tied:
            self.lm_head.weight = self.wte.weight

    def forward(self, input_ids, targets=None):
        T = input_ids.size(1)
        if hasattr(self, "pe"):
            x = self.wte(input_ids) + self.pe[:T]
        else:
            pos = torch.arange(0, T, dtype=torch.long, device=input_ids.device)
            x = self.wte(input_ids) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        if targets is None:
            return logits
        return F.cross_entropy(logits.view(-1, logits.size(-1)),
                               targets.view(-1))


# --------------------------------------------------------------------------
# Llama
# --------------------------------------------------------------------------
class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class LlamaAttention(nn.Module):
    def __init__(self, d, heads, kv_heads, mask_buffer_t=0):
        super().__init__()
        self.heads, self.kv_heads, self.hd = heads, kv_heads, d // heads
        self.q_proj = nn.Linear(d, heads * self.hd, bias=False)
        self.k_proj = nn.Linear(d, kv_heads * self.hd, bias=False)
        self.v_proj = nn.Linear(d, kv_heads * self.hd, bias=False)
        self.o_proj = nn.Linear(heads * self.hd, d, bias=False)
        # --mask-buffer: the causal mask as an additive buffer of -inf above
        # the diagonal in every layer, as llama2.c's model.py registers it.
        if mask_buffer_t:
            t = mask_buffer_t
            self.register_buffer("mask", torch.full((1, 1, t, t), float("-inf")).triu(1))

    def forward(self, x, cos, sin, mask):
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.heads, self.hd).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.kv_heads, self.hd).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.kv_heads, self.hd).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        rep = self.heads // self.kv_heads
        if rep > 1:
            k = k[:, :, None, :, :].expand(B, self.kv_heads, rep, T, self.hd)
            k = k.reshape(B, self.heads, T, self.hd)
            v = v[:, :, None, :, :].expand(B, self.kv_heads, rep, T, self.hd)
            v = v.reshape(B, self.heads, T, self.hd)
        scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.hd)
        scores = scores + (self.mask[:, :, :T, :T] if hasattr(self, "mask") else mask)
        p = F.softmax(scores.float(), dim=-1).type_as(q)
        y = torch.matmul(p, v).transpose(1, 2).contiguous().view(B, T, -1)
        return self.o_proj(y)


class LlamaMLP(nn.Module):
    def __init__(self, d, ffn):
        super().__init__()
        self.gate_proj = nn.Linear(d, ffn, bias=False)
        self.up_proj = nn.Linear(d, ffn, bias=False)
        self.down_proj = nn.Linear(ffn, d, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaBlock(nn.Module):
    def __init__(self, d, heads, kv_heads, ffn, mask_buffer_t=0):
        super().__init__()
        self.input_layernorm = RMSNorm(d)
        self.self_attn = LlamaAttention(d, heads, kv_heads, mask_buffer_t)
        self.post_attention_layernorm = RMSNorm(d)
        self.mlp = LlamaMLP(d, ffn)

    def forward(self, x, cos, sin, mask):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class Llama(nn.Module):
    def __init__(self, vocab, d, layers, heads, kv_heads, ffn, mask_buffer_t=0):
        super().__init__()
        self.hd = d // heads
        self.embed_tokens = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList(
            [LlamaBlock(d, heads, kv_heads, ffn, mask_buffer_t) for _ in range(layers)])
        self.norm = RMSNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)

    def forward(self, input_ids, targets=None):
        T = input_ids.shape[1]
        inv_freq = 1.0 / (10000 ** (torch.arange(0, self.hd, 2).float() / self.hd))
        t = torch.arange(T).float()
        freqs = t[:, None] * inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        x = self.embed_tokens(input_ids)
        # In the model's dtype, as HuggingFace's rotary embedding returns
        # them (a bf16 model then computes in bf16 throughout).
        cos, sin = emb.cos()[None, None].to(x.dtype), emb.sin()[None, None].to(x.dtype)
        mask = torch.full((T, T), float("-inf")).triu(1).to(x.dtype)
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        logits = self.lm_head(self.norm(x))
        if targets is None:
            return logits
        return F.nll_loss(F.log_softmax(logits, dim=-1).view(-1, logits.size(-1)),
                          targets.view(-1))


# --------------------------------------------------------------------------
# BERT-style encoder
# --------------------------------------------------------------------------
class BertLayer(nn.Module):
    def __init__(self, d, heads, ffn):
        super().__init__()
        self.heads = heads
        self.query = nn.Linear(d, d)
        self.key = nn.Linear(d, d)
        self.value = nn.Linear(d, d)
        self.attn_out = nn.Linear(d, d)
        self.attn_norm = nn.LayerNorm(d, eps=1e-12)
        self.intermediate = nn.Linear(d, ffn)
        self.output = nn.Linear(ffn, d)
        self.out_norm = nn.LayerNorm(d, eps=1e-12)

    def forward(self, x, ext_mask):
        B, T, C = x.shape
        hd = C // self.heads

        def heads(t):
            return t.view(B, T, self.heads, hd).permute(0, 2, 1, 3)
        q, k, v = heads(self.query(x)), heads(self.key(x)), heads(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(hd)
        p = F.softmax(scores + ext_mask, dim=-1)
        ctx = torch.matmul(p, v).permute(0, 2, 1, 3).contiguous().view(B, T, C)
        x = self.attn_norm(x + self.attn_out(ctx))
        return self.out_norm(x + self.output(F.gelu(self.intermediate(x))))


class Bert(nn.Module):
    def __init__(self, vocab, d, layers, heads, ffn, max_t, labels=3):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, d)
        self.position_embeddings = nn.Embedding(max_t, d)
        self.emb_norm = nn.LayerNorm(d, eps=1e-12)
        self.encoder = nn.Module()
        self.encoder.layer = nn.ModuleList(
            [BertLayer(d, heads, ffn) for _ in range(layers)])
        self.classifier = nn.Linear(d, labels)

    def forward(self, input_ids, attention_mask, targets=None):
        T = input_ids.shape[1]
        pos = torch.arange(T)
        x = self.emb_norm(self.word_embeddings(input_ids) +
                          self.position_embeddings(pos))
        ext = (1.0 - attention_mask[:, None, None, :].float()) * -10000.0
        for layer in self.encoder.layer:
            x = layer(x, ext)
        logits = self.classifier(x[:, 0])
        if targets is None:
            return logits
        return F.cross_entropy(logits, targets)


# --------------------------------------------------------------------------
# MLP
# --------------------------------------------------------------------------
class MLP(nn.Module):
    def __init__(self, sizes, loss):
        super().__init__()
        self.layers = nn.ModuleList(
            [nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:])])
        self.loss = loss

    def forward(self, x, targets=None):
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i + 1 < len(self.layers):
                x = F.relu(x)
        if targets is None:
            return x
        if self.loss == "mse":
            # F.mse_loss has no ONNX symbolic in torch 1.13; same value.
            return ((x - targets) ** 2).mean()
        if self.loss == "bce":
            return F.binary_cross_entropy_with_logits(x, targets)
        return F.nll_loss(F.log_softmax(x, dim=-1), targets)


# --------------------------------------------------------------------------
# torch's own nn.TransformerEncoder (code the project did not write)
# --------------------------------------------------------------------------
class TorchEncoder(nn.Module):
    def __init__(self, vocab, d, layers, heads, ffn):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        layer = nn.TransformerEncoderLayer(d, heads, ffn, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers)
        self.head = nn.Linear(d, vocab)

    def forward(self, input_ids, targets=None):
        logits = self.head(self.encoder(self.embed(input_ids)))
        if targets is None:
            return logits
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


# --------------------------------------------------------------------------
# torchvision's own models (code the project did not write)
# --------------------------------------------------------------------------
class VisionClassifier(nn.Module):
    """A torchvision classifier with its loss in the graph."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x, targets=None):
        logits = self.net(x)
        if targets is None:
            return logits
        return F.cross_entropy(logits, targets)


class ConvNet(nn.Module):
    """Convolutions and pools in the forms torchvision's models do not use:
    1-D with groups and dilation, 2-D with unequal strides, padding and
    dilation, depthwise (groups = channels); max pooling 1-D and 2-D with
    padding, average pooling with ceil_mode and without the padding in the
    divisor, adaptive average pooling to 1 (GlobalAveragePool)."""

    def __init__(self, classes):
        super().__init__()
        self.conv1d = nn.Conv1d(3, 6, 3, stride=2, padding=2, dilation=2, groups=3)
        self.pool1d = nn.MaxPool1d(3, stride=1, padding=1)
        self.conv2d = nn.Conv2d(6, 8, (3, 2), stride=(1, 2), padding=(1, 0), dilation=(2, 1))
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        self.depthwise = nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False)
        self.avgpool = nn.AvgPool2d(2, stride=2, padding=1, ceil_mode=True,
                                    count_include_pad=False)
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(8, classes)

    def forward(self, x):
        b, c, h, w = x.shape
        y = self.pool1d(self.conv1d(x.reshape(b, c, h * w)))  # [b, 6, L]
        y = y.reshape(b, 6, 4, -1)
        y = self.maxpool(F.relu(self.conv2d(y)))
        y = self.avgpool(self.depthwise(y))
        return self.head(torch.flatten(self.gap(y), 1))


def vision_net(args):
    if args.model == "convnet":
        return ConvNet(args.classes)
    import torchvision
    if args.model == "vit":
        return torchvision.models.VisionTransformer(
            image_size=args.image, patch_size=args.patch, num_layers=args.layers,
            num_heads=args.heads, hidden_dim=args.dim, mlp_dim=args.ffn or 2 * args.dim,
            num_classes=args.classes)
    return torchvision.models.resnet18(num_classes=args.classes)


def build(args):
    """The model and example inputs (names -> tensors)."""
    torch.manual_seed(args.seed)
    B, T, V = args.batch, args.seq, args.vocab
    ids = torch.randint(0, V, (B, T))
    if args.model == "gpt2":
        model = GPT2(V, args.dim, args.layers, args.heads, T, tied=not args.untied,
                     mask_buffer=args.mask_buffer, pe_buffer=args.pe_buffer)
        inputs = {"input_ids": ids}
        if args.loss:
            inputs["targets"] = torch.randint(0, V, (B, T))
    elif args.model == "llama":
        model = Llama(V, args.dim, args.layers, args.heads, args.kv_heads,
                      args.ffn or 2 * args.dim, T if args.mask_buffer else 0)
        inputs = {"input_ids": ids}
        if args.loss:
            inputs["targets"] = torch.randint(0, V, (B, T))
    elif args.model == "encoder":
        model = TorchEncoder(V, args.dim, args.layers, args.heads, args.ffn or 2 * args.dim)
        inputs = {"input_ids": ids}
        if args.loss:
            inputs["targets"] = torch.randint(0, V, (B, T))
    elif args.model in ("vit", "resnet18", "convnet"):
        model = VisionClassifier(vision_net(args))
        inputs = {"x": torch.randn(B, 3, args.image, args.image)}
        if args.loss:
            inputs["targets"] = torch.randint(0, args.classes, (B,))
    elif args.model == "bert":
        model = Bert(V, args.dim, args.layers, args.heads,
                     args.ffn or 4 * args.dim, T)
        mask = torch.ones(B, T, dtype=torch.long)
        mask[:, T // 2:] = 0
        inputs = {"input_ids": ids, "attention_mask": mask}
        if args.loss:
            inputs["targets"] = torch.randint(0, 3, (B,))
    else:
        loss = args.loss or None
        out = args.dim if loss != "mse" and loss != "bce" else 4
        model = MLP([args.dim * 2, args.dim * 4, args.dim], loss)
        inputs = {"x": torch.randn(B, args.dim * 2)}
        if loss == "nll":
            inputs["targets"] = torch.randint(0, args.dim, (B,))
        elif loss in ("mse", "bce"):
            inputs["targets"] = torch.rand(B, args.dim)
        del out
    # GPT-2's initialisation (normal 0.02 weights, zero biases) for the
    # transformers, so the first loss is near log(vocab) as in practice.
    if args.model not in ("mlp", "vit", "resnet18", "convnet"):  # torch's own init
        for m in model.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, 0.0, 0.02)
                if getattr(m, "bias", None) is not None:
                    nn.init.zeros_(m.bias)
    # Fresh LayerNorm/RMSNorm parameters are all ones or zeros, and the
    # exporter merges initializers with equal values in eval mode; perturb
    # them as training would (tied weights stay one tensor).
    if not args.fresh:
        with torch.no_grad():
            for prm in model.parameters():
                prm.add_(0.01 * torch.randn_like(prm))
    return model.eval(), inputs


def parse_args(argv):
    """The generator's options for a command line (without -o: no export)."""
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", choices=["gpt2", "llama", "bert", "mlp", "encoder",
                                     "vit", "resnet18", "convnet"])
    p.add_argument("-o", "--output")
    p.add_argument("--opset", type=int, default=17)
    p.add_argument("--dynamic-batch", action="store_true")
    p.add_argument("--untied", action="store_true", help="gpt2: untie lm_head")
    p.add_argument("--pe-buffer", action="store_true",
                   help="gpt2: a sinusoidal position buffer added to the embeddings")
    p.add_argument("--mask-buffer", action="store_true",
                   help="gpt2: a causal-mask buffer of ones registered in every block "
                        "(nanoGPT); llama: an additive one of -inf (llama2.c)")
    p.add_argument("--loss", nargs="?", const="default", default="",
                   help="put the loss in the graph (mlp: mse|bce|nll)")
    p.add_argument("--external-data", action="store_true")
    p.add_argument("--fresh", action="store_true",
                   help="export the parameters as initialised (copies of a layer stay equal)")
    p.add_argument("--training-mode", action="store_true",
                   help="export with TrainingMode.TRAINING (equal initializers stay apart)")
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--seq", type=int, default=16)
    p.add_argument("--vocab", type=int, default=96)
    p.add_argument("--dim", type=int, default=32)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--ffn", type=int, default=0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--image", type=int, default=16, help="vit, resnet18: image side")
    p.add_argument("--patch", type=int, default=4, help="vit: patch side")
    p.add_argument("--classes", type=int, default=10, help="vit, resnet18: classes")
    p.add_argument("--shapes-json", action="store_true",
                   help="print input and output shapes as JSON")
    args = p.parse_args(argv)
    if args.model == "mlp" and args.loss == "default":
        args.loss = "mse"
    return args


def factory(model="gpt2", **options):
    """The model and example inputs for python/fsdp_trace (loss inside):

        python3 -m fsdp_trace examples/gen_model.py:factory \\
            --args model=llama dim=64 layers=4 -o llama.mlir

    options are the command line's, as keywords (kv_heads=2, seq=128)."""
    argv = [model]
    for k, v in options.items():
        flag = "--" + k.replace("_", "-")
        if v is True:
            argv.append(flag)
        elif v is not False:
            argv += [flag, str(v)]
    if model != "mlp" and "loss" not in options:
        argv.append("--loss")
    return build(parse_args(argv))


def export(argv):
    """Exports one model as the command line says; returns its shapes."""
    args = parse_args(argv)
    if not args.output:
        raise SystemExit("gen_model.py: -o/--output is required")
    model, inputs = build(args)
    names = list(inputs)
    with torch.no_grad():
        out = model(*inputs.values())
    out_name = "loss" if args.loss else "logits"
    dynamic = None
    if args.dynamic_batch:
        dynamic = {n: {0: "batch"} for n in names}
        if out.dim() > 0:
            dynamic[out_name] = {0: "batch"}
    # The TorchScript exporter everywhere (newer PyTorch defaults to the
    # dynamo one, which names and shapes the graph otherwise): a model made
    # on a GPU machine's PyTorch matches plans made here.
    kw = {}
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        kw["dynamo"] = False
    if args.training_mode:
        kw["training"] = torch.onnx.TrainingMode.TRAINING
    torch.onnx.export(model, tuple(inputs.values()), args.output,
                      input_names=names, output_names=[out_name],
                      dynamic_axes=dynamic, opset_version=args.opset,
                      do_constant_folding=False, **kw)
    if args.external_data:
        import onnx
        m = onnx.load(args.output)
        data = os.path.basename(args.output) + ".data"
        onnx.save_model(m, args.output, save_as_external_data=True,
                        all_tensors_to_one_file=True, location=data,
                        size_threshold=0)
    shapes = {"inputs": {n: list(t.shape) for n, t in inputs.items()},
              "output": list(out.shape)}
    if args.shapes_json:
        json.dump(shapes, sys.stdout)
        print()
    return shapes


if __name__ == "__main__":
    export(sys.argv[1:])
