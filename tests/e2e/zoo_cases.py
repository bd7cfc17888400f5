"""The models of the zoo suite (zoo.py): every classification builder of
torchvision.models, the trainable models of torchaudio.models and
torch.nn's recurrent layers, each a Case that builds the model at a given dtype and draws one batch.

A Case's batch is split over ranks along dimension 0 of every tensor, so
whatever a model holds per sample (a lengths table of Conformer or
Emformer, which they read with `.item()`) is a buffer repeating with the
period of one rank's share: every rank's plan is traced with the same
constants.
"""
import dataclasses
import importlib
from typing import Callable, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclasses.dataclass
class Case:
    name: str
    source: str                      # torchvision | torchaudio | torch.nn | transformers
    build: Callable                  # (dtype, batch) -> module in training mode
    inputs: Callable                 # (generator, batch) -> forward's inputs (a dict)
    target: Callable                 # (generator, output) -> the loss's target
    loss: Callable                   # (output, target) -> scalar
    train: bool = True               # trace in training mode
    note: str = ""                   # why it is traced as it is
    refused: Optional[str] = None    # out of scope: the reason, nothing run
    # Entered around PyTorch's own reference steps, where PyTorch cannot
    # differentiate the model as written on the CPU (FlexAttention); the
    # suite checks first that the model's forward is the same under it.
    reference_context: Optional[Callable] = None
    # The loss is a mean over counted targets (ignore_index at padding)
    # whose count differs by rank: 2 ranks average the ranks' means, as
    # PyTorch DDP and FSDP do, and are judged against that (zoo.py).
    rank_means: bool = False
    # How many attention products the 1-rank plan must run fused
    # (fsdp.attention), where the case is there to show that fsdp-opt
    # fuses them (a padded batch's mask); None: not checked.
    fused_attention: Optional[int] = None


def first(out):
    return out[0] if isinstance(out, (tuple, list)) else out


def squared_error(out, target):
    """F.mse_loss of the first output, written as torch.onnx.export (1.13,
    opset 17) can write it: it has no symbolic for aten::mse_loss."""
    return ((first(out) - target) ** 2).mean()


# ---------------------------------------------------------------- torchvision

# Smallest inputs the architectures accept (their own downsampling).
IMAGE = {"inception_v3": 75, "googlenet": 32, "alexnet": 63, "maxvit_t": 224,
         "swin": 32, "regnet": 32}


def _vision_build(name):
    import torchvision.models as tvm
    from torchvision.ops import StochasticDepth

    def build(dtype, batch):
        torch.manual_seed(0)
        kwargs = {"num_classes": 10}
        if name.startswith(("vit_", "swin", "maxvit", "efficientnet")):
            kwargs["dropout"] = 0.0
        if name.startswith(("swin", "maxvit", "convnext", "efficientnet")):
            kwargs["stochastic_depth_prob"] = 0.0
        if name in ("googlenet", "inception_v3"):
            kwargs.update({"aux_logits": False, "init_weights": True})
        if name.startswith("vit_"):
            kwargs["image_size"] = 28 if name == "vit_h_14" else 32
        try:
            m = getattr(tvm, name)(**kwargs)
        except TypeError:
            kwargs.pop("dropout", None)
            kwargs.pop("stochastic_depth_prob", None)
            m = getattr(tvm, name)(**kwargs)
        # No dropout: the suite compares one step with PyTorch's, whose
        # masks no other generator reproduces (dropout.py tests ours).
        for mod in m.modules():
            if isinstance(mod, (nn.Dropout, StochasticDepth)):
                mod.p = 0.0
        return m.to(dtype).train()
    return build


def _image_size(name):
    if name.startswith("vit"):
        return 28 if name == "vit_h_14" else 32
    return next((s for k, s in IMAGE.items() if name.startswith(k)), 32)


def vision_cases():
    import torchvision.models as tvm
    names = sorted(n for n in dir(tvm) if n[0].islower() and callable(getattr(tvm, n))
                   and not n.startswith("get") and n != "list_models")
    return [Case(n, "torchvision", _vision_build(n),
                 lambda g, b, s=_image_size(n): {"x": torch.randn(b, 3, s, s, generator=g)},
                 lambda g, out: torch.randint(0, 10, (out.shape[0],), generator=g),
                 F.cross_entropy) for n in names]


# Video classifiers (torchvision.models.video): clips of (3, T, H, W), the
# smallest each accepts. S3D's last pool is a fixed (2, 7, 7) window, so it
# needs 16 frames of 224x224; the ResNets pool adaptively.
CLIP = {"s3d": (16, 224), "mvit": (16, 224)}


def _video_build(name):
    import torchvision.models.video as tvv

    def build(dtype, batch):
        torch.manual_seed(0)
        kwargs = {"num_classes": 10}
        if name in ("s3d",) or name.startswith("mvit"):
            kwargs["dropout"] = 0.0
        m = getattr(tvv, name)(**kwargs)
        for mod in m.modules():
            if isinstance(mod, nn.Dropout):
                mod.p = 0.0
            if hasattr(mod, "stochastic_depth_prob"):
                mod.stochastic_depth_prob = 0.0
        return m.to(dtype).train()
    return build


def video_cases():
    import torchvision.models.video as tvv
    names = sorted(n for n in dir(tvv) if n[0].islower() and callable(getattr(tvv, n))
                   and n not in ("resnet", "mvit"))
    cases = []
    for n in names:
        frames, size = next((v for k, v in CLIP.items() if n.startswith(k)), (4, 32))
        cases.append(Case(n, "torchvision", _video_build(n),
                          lambda g, b, t=frames, s=size: {
                              "x": torch.randn(b, 3, t, s, s, generator=g)},
                          lambda g, out: torch.randint(0, 10, (out.shape[0],), generator=g),
                          F.cross_entropy))
    return cases


# ----------------------------------------------------------------- torchaudio

class WithLengths(nn.Module):
    """A torchaudio model whose forward takes per-sample lengths and reads
    their maximum with `.item()` (Conformer, Emformer, RNN-T, Tacotron2):
    the lengths are integer buffers, constants of the plan (a plan's
    shapes are fixed, so the padded length is too)."""

    def __init__(self, model, order, **lengths):
        super().__init__()
        self.model = model
        self.order = order  # forward's arguments: 'x', 'y' or a buffer's name
        for name, value in lengths.items():
            self.register_buffer(name, value)

    def forward(self, x, y=None):
        given = {"x": x, "y": y}
        return self.model(*(given[n] if n in given else getattr(self, n)
                            for n in self.order))


def _lengths(pattern, batch):
    return torch.tensor(pattern * (batch // len(pattern)) + pattern[:batch % len(pattern)])


def _audio(name, make, inputs, note="", train=True, lengths=None, order=None, refused=None):
    import torchaudio.models as am

    def build(dtype, batch):
        torch.manual_seed(0)
        m = make(am)
        if lengths:
            m = WithLengths(m, order, **{k: _lengths(v, batch) for k, v in lengths.items()})
        return m.to(dtype).train()
    return Case(name, "torchaudio", build, inputs,
                lambda g, out: torch.randn(first(out).shape, generator=g),
                squared_error, train=train, note=note,
                refused=refused)


def _wav2vec2(am, mode, norm_first):
    return am.wav2vec2_model(
        extractor_mode=mode, extractor_conv_layer_config=[(16, 10, 5), (16, 3, 2)],
        extractor_conv_bias=mode == "layer_norm", encoder_embed_dim=32,
        encoder_projection_dropout=0.0, encoder_pos_conv_kernel=8, encoder_pos_conv_groups=4,
        encoder_num_layers=2, encoder_num_heads=2, encoder_attention_dropout=0.0,
        encoder_ff_interm_features=64, encoder_ff_interm_dropout=0.0, encoder_dropout=0.0,
        encoder_layer_norm_first=norm_first, encoder_layer_drop=0.0, aux_num_out=10)


LAYER_DROP = ("traced in eval mode: its layer drop reads torch.rand(1).item() in training "
              "(0 here, so the step is the same)")


def audio_cases():
    r = torch.randn
    return [
        _audio("wav2letter", lambda am: am.Wav2Letter(num_classes=10, input_type="waveform",
                                                      num_features=1),
               lambda g, b: {"x": r(b, 1, 800, generator=g)}),
        _audio("wav2letter_mfcc", lambda am: am.Wav2Letter(num_classes=10, input_type="mfcc",
                                                           num_features=13),
               lambda g, b: {"x": r(b, 13, 40, generator=g)}),
        _audio("deepspeech", lambda am: am.DeepSpeech(n_feature=16, n_hidden=32, n_class=10),
               lambda g, b: {"x": r(b, 1, 12, 16, generator=g)}),
        _audio("conv_tasnet", lambda am: am.ConvTasNet(
                   num_sources=2, enc_kernel_size=8, enc_num_feats=16, msk_kernel_size=3,
                   msk_num_feats=8, msk_num_hidden_feats=16, msk_num_layers=2, msk_num_stacks=2),
               lambda g, b: {"input": r(b, 1, 256, generator=g)}),
        _audio("conformer", lambda am: am.Conformer(
                   input_dim=16, num_heads=2, ffn_dim=32, num_layers=2,
                   depthwise_conv_kernel_size=3),
               lambda g, b: {"x": r(b, 12, 16, generator=g)},
               lengths={"lengths": [12, 9]}, order=["x", "lengths"]),
        _audio("emformer", lambda am: am.Emformer(
                   input_dim=16, num_heads=2, ffn_dim=32, num_layers=2, segment_length=4,
                   right_context_length=1),
               lambda g, b: {"x": r(b, 13, 16, generator=g)},
               lengths={"lengths": [12, 9]}, order=["x", "lengths"]),
        _audio("emformer_rnnt", lambda am: am.emformer_rnnt_model(
                   input_dim=16, encoding_dim=16, num_symbols=10, segment_length=4,
                   right_context_length=1, time_reduction_input_dim=16, time_reduction_stride=2,
                   transformer_num_heads=2, transformer_ffn_dim=32, transformer_num_layers=2,
                   transformer_dropout=0.0, transformer_activation="gelu",
                   transformer_left_context_length=0, transformer_max_memory_size=0,
                   transformer_weight_init_scale_strategy="depthwise",
                   transformer_tanh_on_mem=True, symbol_embedding_dim=16, num_lstm_layers=1,
                   lstm_layer_norm=True, lstm_layer_norm_epsilon=1e-5, lstm_dropout=0.0),
               lambda g, b: {"x": r(b, 13, 16, generator=g),
                             "y": torch.randint(0, 10, (b, 4), generator=g)},
               lengths={"source_lengths": [12, 9], "target_lengths": [4, 3]},
               order=["x", "source_lengths", "y", "target_lengths"]),
        _audio("wav2vec2_model", lambda am: _wav2vec2(am, "group_norm", False),
               lambda g, b: {"waveforms": r(b, 400, generator=g)},
               train=False, note=LAYER_DROP),
        _audio("wav2vec2_model_layer_norm_first", lambda am: _wav2vec2(am, "layer_norm", True),
               lambda g, b: {"waveforms": r(b, 400, generator=g)},
               train=False, note="HuBERT-large's layout; " + LAYER_DROP),
        _audio("wavernn", lambda am: am.WaveRNN(
                   upsample_scales=[2, 2], n_classes=16, hop_length=4, n_res_block=1, n_rnn=16,
                   n_fc=16, kernel_size=3, n_freq=8, n_hidden=8, n_output=8),
               lambda g, b: {"waveform": r(b, 1, 32, generator=g),
                             "specgram": r(b, 1, 8, 10, generator=g)}),
        _audio("tacotron2", lambda am: am.Tacotron2(
                   n_mels=8, n_symbol=20, symbol_embedding_dim=16, encoder_embedding_dim=16,
                   encoder_n_convolution=1,
                   encoder_kernel_size=3, decoder_rnn_dim=16, decoder_max_step=20,
                   decoder_dropout=0.0, attention_rnn_dim=16, attention_hidden_dim=16,
                   attention_location_n_filter=4, attention_location_kernel_size=3,
                   attention_dropout=0.0, prenet_dim=16, postnet_n_convolution=1,
                   postnet_kernel_size=3, postnet_embedding_dim=16),
               lambda g, b: {"x": torch.randint(0, 20, (b, 6), generator=g),
                             "y": r(b, 8, 10, generator=g)},
               lengths={"token_lengths": [6], "mel_lengths": [10]},
               order=["x", "token_lengths", "y", "mel_lengths"]),
        _audio("hdemucs", lambda am: am.HDemucs(sources=["a", "b"], channels=8, growth=2,
                                                nfft=64, depth=2),
               lambda g, b: {"input": r(b, 2, 512, generator=g)},
               refused="its spectrogram is complex (torch.stft/istft): complex numbers are "
                       "out of scope"),
    ]


# ------------------------------------------------------------------ torch.nn

def _recurrent(name, make):
    def build(dtype, batch):
        torch.manual_seed(0)
        return make().to(dtype).train()
    return Case(name, "torch.nn", build,
                lambda g, b: {"input": torch.randn(b, 6, 8, generator=g)},
                lambda g, out: torch.randn(first(out).shape, generator=g), squared_error)


def nn_cases():
    """torch.nn's recurrent layers, as models use them (batch first): the
    tracer lowers PyTorch's own cell arithmetic, the ONNX door the RNN, GRU
    and LSTM nodes the exporter writes; and rotary attention written with
    complex numbers."""
    return [
        _recurrent("lstm_2layer_bidirectional",
                   lambda: nn.LSTM(8, 12, num_layers=2, bidirectional=True, batch_first=True)),
        _recurrent("gru_2layer", lambda: nn.GRU(8, 12, num_layers=2, batch_first=True)),
        _recurrent("rnn_relu_bidirectional",
                   lambda: nn.RNN(8, 12, nonlinearity="relu", bidirectional=True,
                                  batch_first=True)),
        _recurrent("rope_complex", ComplexRotary),
        _recurrent("rope_complex_table", lambda: ComplexRotary(table=True)),
        _recurrent("complex_ops", ComplexOps),
        _recurrent("masks_any_all", MasksAnyAll),
        dataclasses.replace(_recurrent("masked_fill_empty_query", MaskedFillAttention),
                            fused_attention=1),
    ]


class MaskedFillAttention(nn.Module):
    """Attention written out with masked_fill(-1e9), as hand-written models
    mask it: causal, key 0 hidden, and keys kept where the data says
    (here every one), so query 0 sees no key. PyTorch averages its values
    there (equal scores) and sends its scores no gradient: the fused
    attention must too (average_empty_rows), where -inf would give NaN."""

    def __init__(self):
        super().__init__()
        self.qkv, self.o = nn.Linear(8, 24), nn.Linear(8, 8)

    def forward(self, input):
        T = input.shape[1]
        q, k, v = self.qkv(input).split(8, dim=-1)
        att = q @ k.transpose(-1, -2) / 8 ** 0.5
        j = torch.arange(T)
        keep = (j[None, :] <= j[:, None]) & (j[None, :] >= 1)
        keep = keep & (input[:, None, :, 0] > -100.0)  # from the data
        att = att.masked_fill(~keep, -1e9)
        return self.o(att.softmax(dim=-1) @ v)


class MasksAnyAll(nn.Module):
    """Boolean reductions as masks use them: a row kept where any of its
    features passes a threshold, a column where all of its rows do, and a
    sample where anything passes another (any/all over a dim, and over
    every element)."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 8)

    def forward(self, input):
        x = self.a(input)
        rows = (x > 0.5).any(dim=-1, keepdim=True)
        cols = (x > -0.5).all(dim=1, keepdim=True)
        both = (x > 1.0).any(dim=2, keepdim=True).any(dim=1, keepdim=True) & torch.all(x < 3.0)
        return torch.where(rows, x, -x) * torch.where(cols, 2.0, 0.5) + torch.where(both, x, 0.0)


class ComplexRotary(nn.Module):
    """Causal attention whose queries and keys are rotated as complex
    products, as Meta's Llama code and torchtitan write RoPE: a table of
    unit complex numbers (torch.polar), each head's
    features paired into complex numbers (view_as_complex), multiplied,
    unpaired (view_as_real). The plan holds no complex tensor
    (fsdp_trace/decompose/complex.py)."""

    def __init__(self, dim=8, heads=2, length=6, table=False):
        super().__init__()
        self.heads, self.table = heads, table
        self.q, self.k, self.v = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
        half = dim // heads // 2
        rates = 1.0 / (10000.0 ** (torch.arange(half).float() / half))
        # The angles, not their complex rotations, are the buffer: Module.to
        # (the zoo builds each model at float64 and float32) casts a complex
        # buffer to the real dtype, dropping its imaginary part.
        self.register_buffer("angles", torch.outer(torch.arange(length).float(), rates),
                             persistent=False)
        if table:
            self.register_buffer("rotations", torch.polar(torch.ones_like(self.angles),
                                                          self.angles), persistent=False)
            self.register_buffer("positions", torch.arange(length), persistent=False)

    def _apply(self, fn, *args, **kwargs):
        # With `table`, the rotations are a complex buffer (torchtitan's
        # freqs_cis), built again after every cast of the module.
        out = super()._apply(fn, *args, **kwargs)
        if self.table:
            self.rotations = torch.polar(torch.ones_like(self.angles), self.angles)
        return out

    def rotate(self, x):
        B, T, H, D = x.shape
        pairs = torch.view_as_complex(x.float().reshape(B, T, H, D // 2, 2))
        if self.table:
            # Each token's rotation picked by its position with torch.gather,
            # as torchtitan 0.3 does with the positions it is given: here a
            # token moves one position on where its first feature is
            # positive, so the index is data (a constant one is folded).
            moved = (self.positions[:T] + (x[:, :, 0, 0] > 0).long()) % T
            at = moved.view(B, T, 1, 1).expand(B, T, 1, D // 2)
            table = self.rotations[None, :, None, :].expand(B, -1, -1, -1)
            rotations = torch.gather(table, 1, at)
        else:
            angles = self.angles[:T].float()
            rotations = torch.polar(torch.ones_like(angles), angles).view(1, T, 1, D // 2)
        turned = pairs * rotations
        return torch.view_as_real(turned).flatten(3).type_as(x)

    def forward(self, input):
        B, T, C = input.shape
        shape = (B, T, self.heads, C // self.heads)
        q = self.rotate(self.q(input).view(shape)).transpose(1, 2)
        k = self.rotate(self.k(input).view(shape)).transpose(1, 2)
        v = self.v(input).view(shape).transpose(1, 2)
        scores = q @ k.transpose(-1, -2) / (C // self.heads) ** 0.5
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        weights = scores.masked_fill(~causal, float("-inf")).softmax(-1)
        return (weights @ v).transpose(1, 2).reshape(B, T, C)


class ComplexOps(nn.Module):
    """The rest of what decompose/complex.py lowers, on complex tensors
    from the data: sums, differences, a real factor, division by a number,
    slices, transposes, permutes, concatenation, expansion, and the real
    part by a cast."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 8)
        self.scale = nn.Parameter(torch.rand(6, 1) + 0.5)

    def forward(self, input):
        B, T, _ = input.shape
        x = torch.view_as_complex(self.a(input).reshape(B, T, 4, 2))
        y = torch.view_as_complex(self.b(input).reshape(B, T, 4, 2))
        z = (x + y) * (x - y[:, :, :1].expand(B, T, 4)) / 3.0
        z = z * self.scale
        z = torch.cat([z[:, :, 1:], z[:, :, :1]], dim=-1).transpose(1, 2)
        z = z.permute(0, 2, 1)[:, 1:-1]
        return torch.view_as_real(z).flatten(2) + z.to(torch.float32).repeat(1, 1, 2)


class Attention(nn.Module):
    """F.scaled_dot_product_attention as PyTorch 2.x models call it: an
    explicit `scale` (T5 uses 1) and grouped-query heads (`enable_gqa`, 4
    query heads on 2 key/value heads), under a learned additive bias."""

    def __init__(self):
        super().__init__()
        self.q, self.kv = nn.Linear(8, 8), nn.Linear(8, 8)
        self.bias = nn.Parameter(torch.randn(1, 4, 6, 6) * 0.1)

    def forward(self, input):
        B, T, _ = input.shape
        q = self.q(input).view(B, T, 4, 2).transpose(1, 2)
        k, v = self.kv(input).view(B, T, 2, 4).transpose(1, 2).chunk(2, dim=-1)
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=self.bias, scale=1.0,
                                           enable_gqa=True)
        return o.transpose(1, 2).reshape(B, T, 8)


class Flex(nn.Module):
    """FlexAttention as models write it (torch.nn.attention.flex_attention,
    PyTorch 2.5+), 4 query heads on 2 key/value heads (enable_gqa):

    - `alibi`: a causal BlockMask made once (create_block_mask, as
      torchtitan's causal mask) and a score_mod adding a learned slope per
      head times the distance, a parameter read inside score_mod by
      indexing with the head;
    - `window`: flex_attention behind torch.compile (as torchtitan calls
      it), a mask_mod of a causal window of 3 that also hides key 0, so
      query 0 sees nothing (flex gives that row zeros), and a tanh
      soft-cap score_mod (Gemma 2's)."""

    def __init__(self, kind):
        super().__init__()
        from torch.nn.attention import flex_attention as fa
        self.kind = kind
        self.q, self.kv = nn.Linear(8, 8), nn.Linear(8, 8)
        if kind == "alibi":
            self.slope = nn.Parameter(torch.tensor([0.5, 0.25, 0.125, 0.0625]))
            self.mask = fa.create_block_mask(lambda b, h, q, kv: q >= kv, None, None, 6, 6,
                                             device="cpu")
            self.attend = fa.flex_attention
        else:
            self.mask = fa.create_block_mask(
                lambda b, h, q, kv: (q >= kv) & (q - kv < 3) & (kv > 0), None, None, 6, 6,
                device="cpu")
            self.attend = torch.compile(fa.flex_attention)

    def forward(self, input):
        B, T, _ = input.shape
        q = self.q(input).view(B, T, 4, 2).transpose(1, 2)
        k, v = self.kv(input).view(B, T, 2, 4).transpose(1, 2).chunk(2, dim=-1)
        if self.kind == "alibi":
            slope = self.slope

            def score_mod(score, b, h, q_idx, kv_idx):
                return score + slope[h] * (kv_idx - q_idx)
        else:
            def score_mod(score, b, h, q_idx, kv_idx):
                return 5.0 * torch.tanh(score / 5.0)
        o = self.attend(q, k, v, score_mod=score_mod, block_mask=self.mask, enable_gqa=True)
        return o.transpose(1, 2).reshape(B, T, 8)


def _flex(name, kind):
    from fsdp_trace.flex_attention import as_ops
    case = _recurrent(name, lambda: Flex(kind))
    case.reference_context = as_ops
    case.note = ("PyTorch's reference steps run flex_attention as its eager math "
                 "(it refuses backward on the CPU)")
    return case


def attention_cases():
    """Only where this PyTorch's attention takes scale and enable_gqa (2.5+),
    and FlexAttention where it has it."""
    try:
        schema = torch.ops.aten.scaled_dot_product_attention.default._schema
    except (AttributeError, RuntimeError):  # 1.13: no public attention op
        return []
    if "enable_gqa" not in [a.name for a in schema.arguments]:
        return []
    # The learned bias is no constant, so the attention takes PyTorch's
    # safe softmax; it fuses, and the bias's gradient is composed around
    # the fused op (AttentionOp::additiveMaskGrad).
    cases = [dataclasses.replace(_recurrent("sdpa_scale_gqa", Attention), fused_attention=1)]
    try:
        importlib.import_module("torch.nn.attention.flex_attention")
    except ImportError:
        return cases
    return cases + [_flex("flex_alibi_gqa", "alibi"), _flex("flex_window_softcap", "window")]


def all_cases():
    from zoo_hf import hf_cases  # transformers' models, where it is installed
    return (vision_cases() + video_cases() + audio_cases() + nn_cases() + attention_cases()
            + hf_cases())
