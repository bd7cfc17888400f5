"""Hugging Face `transformers` models for the zoo (issue 38.3): each built
from a small config with random initialisation (no hub download), in
training mode with its dropout probabilities at 0 (a mask PyTorch draws is
one no other generator reproduces, as for the vision zoo), its loss as
`transformers` computes it (the model's `loss_function`: ForCausalLM's
shifted cross-entropy for the decoders, ForMaskedLM's for T5's decoder,
ForSequenceClassification's for the encoders). Mixtures of experts run
`experts_implementation="batched_mm"`, the static-shape form transformers
provides (each token's k experts' weights gathered, no data-dependent
split): the eager form's loop over the experts each token picked has
shapes that depend on the routing, which a plan fixed before it runs
cannot have.
"""
import torch

from zoo_cases import Case

VOCAB, T, H = 128, 16, 32


def _transformers():
    import transformers
    return transformers


def _loss(kind):
    def loss(out, target):
        from transformers.loss.loss_utils import LOSS_MAPPING
        logits = out
        if kind == "ForSequenceClassification":
            n = logits.shape[-1]
            # ForSequenceClassificationLoss reads num_labels from the config.
            cfg = type("Config", (), {"num_labels": n, "problem_type": "single_label_classification"})
            return LOSS_MAPPING[kind](target, logits, cfg)
        return LOSS_MAPPING[kind](logits, target, vocab_size=logits.shape[-1])
    return loss


class Logits(torch.nn.Module):
    """The model's logits for forward's inputs (the loss is taken outside,
    on the labels, as a training loop's `loss_function` call does)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids=None, decoder_input_ids=None, pixel_values=None):
        given = dict(input_ids=input_ids, decoder_input_ids=decoder_input_ids,
                     pixel_values=pixel_values)
        return self.model(**{k: v for k, v in given.items() if v is not None}).logits


def _case(name, config, cls, kind, inputs, note=""):
    def build(dtype, batch):
        torch.manual_seed(0)
        t = _transformers()
        cfg = getattr(t, config[0])(**config[1])
        if hasattr(cfg, "use_cache"):
            cfg.use_cache = False  # training: no key/value cache
        m = getattr(t, cls)(cfg).to(dtype)
        m.train()
        return Logits(m)

    def target(g, out):
        if kind == "ForSequenceClassification":
            return torch.randint(0, out.shape[-1], out.shape[:1], generator=g)
        return torch.randint(0, VOCAB, out.shape[:2], generator=g)
    return Case(name=name, source="transformers", build=build, inputs=inputs,
                target=target, loss=_loss(kind), note=note)


def _tokens(g, batch):
    return {"input_ids": torch.randint(0, VOCAB, (batch, T), generator=g)}


def _seq2seq(g, batch):
    ids = torch.randint(0, VOCAB, (batch, T), generator=g)
    dec = torch.randint(1, VOCAB, (batch, T), generator=g)
    dec[:, 0] = 0  # T5's decoder_start_token_id (the pad id)
    return {"input_ids": ids, "decoder_input_ids": dec}


def _images(g, batch):
    return {"pixel_values": torch.randn(batch, 3, 32, 32, generator=g)}


NO_DROPOUT = dict(attention_dropout=0.0)
DECODER = dict(vocab_size=VOCAB, hidden_size=H, intermediate_size=64, num_hidden_layers=2,
               num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
               **NO_DROPOUT)


def hf_cases():
    """The cases (empty where transformers is not installed: Debian's
    torch 1.13 has none; the pinned 2.x venv has it)."""
    try:
        _transformers()
    except ImportError:
        return []
    moe = dict(DECODER, experts_implementation="batched_mm")
    enc = dict(vocab_size=VOCAB, hidden_size=H, num_hidden_layers=2, num_attention_heads=4,
               intermediate_size=64, max_position_embeddings=64, hidden_dropout_prob=0.0,
               attention_probs_dropout_prob=0.0, num_labels=3)
    return [
        _case("gpt2", ("GPT2Config", dict(vocab_size=VOCAB, n_embd=H, n_layer=2, n_head=4,
                                          n_positions=64, attn_pdrop=0.0, resid_pdrop=0.0,
                                          embd_pdrop=0.0, bos_token_id=0, eos_token_id=0)),
              "GPT2LMHeadModel", "ForCausalLM", _tokens, "tied embedding and head"),
        _case("llama", ("LlamaConfig", DECODER), "LlamaForCausalLM", "ForCausalLM", _tokens,
              "GQA 4/2 heads, RoPE"),
        _case("mistral", ("MistralConfig", dict(DECODER, sliding_window=8)),
              "MistralForCausalLM", "ForCausalLM", _tokens, "sliding window 8 < T"),
        _case("qwen2", ("Qwen2Config", DECODER), "Qwen2ForCausalLM", "ForCausalLM", _tokens,
              "QKV bias"),
        _case("gemma", ("GemmaConfig", dict(DECODER, head_dim=8)), "GemmaForCausalLM",
              "ForCausalLM", _tokens, "tied, scaled embedding"),
        _case("phi", ("PhiConfig", dict(DECODER, resid_pdrop=0.0, embd_pdrop=0.0,
                                        partial_rotary_factor=0.5)),
              "PhiForCausalLM", "ForCausalLM", _tokens, "parallel block, partial RoPE"),
        _case("bert", ("BertConfig", enc), "BertForSequenceClassification",
              "ForSequenceClassification", _tokens),
        _case("roberta", ("RobertaConfig", dict(enc, pad_token_id=1)),
              "RobertaForSequenceClassification", "ForSequenceClassification", _tokens),
        _case("t5", ("T5Config", dict(vocab_size=VOCAB, d_model=H, d_kv=8, d_ff=64,
                                      num_layers=2, num_decoder_layers=2, num_heads=4,
                                      dropout_rate=0.0, decoder_start_token_id=0,
                                      pad_token_id=0)),
              "T5ForConditionalGeneration", "ForMaskedLM", _seq2seq,
              "encoder-decoder, relative position buckets"),
        _case("vit", ("ViTConfig", dict(image_size=32, patch_size=8, hidden_size=H,
                                        num_hidden_layers=2, num_attention_heads=4,
                                        intermediate_size=64, hidden_dropout_prob=0.0,
                                        attention_probs_dropout_prob=0.0, num_labels=3)),
              "ViTForImageClassification", "ForSequenceClassification", _images),
        _case("mixtral", ("MixtralConfig", dict(moe, num_local_experts=4,
                                                num_experts_per_tok=2)),
              "MixtralForCausalLM", "ForCausalLM", _tokens, "4 experts, top-2, batched_mm"),
        _case("qwen2_moe", ("Qwen2MoeConfig", dict(moe, num_experts=4, num_experts_per_tok=2,
                                                   moe_intermediate_size=32,
                                                   shared_expert_intermediate_size=64)),
              "Qwen2MoeForCausalLM", "ForCausalLM", _tokens,
              "4 experts, top-2, shared expert, batched_mm"),
    ]
