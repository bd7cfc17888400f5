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

    def forward(self, input_ids=None, decoder_input_ids=None, pixel_values=None,
                input_values=None, input_features=None, attention_mask=None):
        given = dict(input_ids=input_ids, decoder_input_ids=decoder_input_ids,
                     pixel_values=pixel_values, input_values=input_values,
                     input_features=input_features, attention_mask=attention_mask)
        return self.model(**{k: v for k, v in given.items() if v is not None}).logits


def _no_dropout(cfg):
    """Every dropout probability of a config (and its sub-configs) at 0,
    whatever the architecture calls it (attn_pdrop, hidden_dropout_prob,
    layerdrop, ...): a mask PyTorch draws is one no other generator
    reproduces."""
    for k, v in list(vars(cfg).items()):
        if isinstance(v, float) and "drop" in k and v > 0:
            setattr(cfg, k, 0.0)
        elif hasattr(v, "to_dict") and hasattr(v, "__dict__"):
            _no_dropout(v)


def _case(name, config, cls, kind, inputs, note="", attention=None, fused=None,
          checkpointing=False):
    """`attention`: the config's attn_implementation, where not its default
    (sdpa); "flex_attention" runs PyTorch's reference steps under
    fsdp_trace.flex_attention.as_ops (PyTorch refuses its backward on the
    CPU). `fused`: how many attention products the plan must fuse.
    `checkpointing`: the model checkpoints its layers itself
    (gradient_checkpointing_enable), which fsdp-opt plans as
    --activation-checkpointing=units."""
    def build(dtype, batch):
        torch.manual_seed(0)
        t = _transformers()
        cfg = getattr(t, config[0])(**config[1])
        _no_dropout(cfg)
        if hasattr(cfg, "use_cache"):
            cfg.use_cache = False  # training: no key/value cache
        if attention is not None:
            cfg._attn_implementation = attention
        m = getattr(t, cls)(cfg).to(dtype)
        if checkpointing:
            m.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        m.train()
        return Logits(m)

    def target(g, out):
        if kind == "ForSequenceClassification":
            return torch.randint(0, out.shape[-1], out.shape[:1], generator=g)
        labels = torch.randint(0, VOCAB, out.shape[:2], generator=g)
        if inputs in (_padded, _left_padded):  # no loss at the padding, as a collator writes
            keep = _padding_mask(out.shape[0]).bool()
            labels[~(keep.flip(-1) if inputs is _left_padded else keep)] = -100
        return labels
    context = None
    if attention == "flex_attention":
        from fsdp_trace.flex_attention import as_ops as context
    return Case(name=name, source="transformers", build=build, inputs=inputs,
                target=target, loss=_loss(kind), note=note, reference_context=context,
                rank_means=inputs in (_padded, _left_padded)
                and kind != "ForSequenceClassification", fused_attention=fused)


def _tokens(g, batch):
    return {"input_ids": torch.randint(0, VOCAB, (batch, T), generator=g)}


# A padded batch as a tokenizer writes one for training: rows of these
# lengths (in turn), pad tokens after them, attention_mask 0 there.
LENGTHS = (16, 11, 7, 13)
PAD = 0


def _padding_mask(batch):
    lengths = torch.tensor([LENGTHS[i % len(LENGTHS)] for i in range(batch)])
    return (torch.arange(T)[None, :] < lengths[:, None]).long()


def _padded(g, batch):
    mask = _padding_mask(batch)
    ids = torch.randint(1, VOCAB, (batch, T), generator=g)
    return {"input_ids": torch.where(mask.bool(), ids, PAD), "attention_mask": mask}


def _left_padded(g, batch):
    """The padding first, as generation-style batches are padded: under
    the causal mask the padding's queries see no key at all."""
    return {k: v.flip(-1) for k, v in _padded(g, batch).items()}


def _seq2seq(g, batch):
    ids = torch.randint(0, VOCAB, (batch, T), generator=g)
    dec = torch.randint(1, VOCAB, (batch, T), generator=g)
    dec[:, 0] = 0  # T5's decoder_start_token_id (the pad id)
    return {"input_ids": ids, "decoder_input_ids": dec}


def _seq2seq_padded(g, batch):
    """The encoder's input padded (attention_mask, which T5 reads in the
    encoder and the cross-attention); the decoder's whole."""
    d = _seq2seq(g, batch)
    mask = _padding_mask(batch)
    return dict(d, input_ids=torch.where(mask.bool(), d["input_ids"], PAD), attention_mask=mask)


def _images(g, batch):
    return {"pixel_values": torch.randn(batch, 3, 32, 32, generator=g)}


IMAGE_TOKEN = VOCAB - 1


def _image_and_tokens(g, batch):
    # A 16x16 image in four 8x8 patches, its four placeholder tokens after
    # the first (what LLaVA's processor writes where the image goes).
    ids = torch.randint(0, IMAGE_TOKEN, (batch, T), generator=g)
    ids[:, 1:5] = IMAGE_TOKEN
    return {"input_ids": ids, "pixel_values": torch.randn(batch, 3, 16, 16, generator=g)}


def _waveform(g, batch):
    return {"input_values": torch.randn(batch, 400, generator=g)}


def _features(g, batch):
    # Whisper's log-mel features: 2 x max_source_positions frames.
    return {"input_features": torch.randn(batch, 8, 32, generator=g),
            "decoder_input_ids": torch.randint(0, VOCAB, (batch, T), generator=g)}


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
    img = dict(image_size=32, num_channels=3, num_labels=3)
    audio = dict(vocab_size=VOCAB, hidden_size=H, num_hidden_layers=2, num_attention_heads=4,
                 intermediate_size=64, conv_dim=(16, 16), conv_stride=(5, 2),
                 conv_kernel=(10, 3), num_conv_pos_embeddings=16,
                 num_conv_pos_embedding_groups=4, hidden_dropout=0.0, attention_dropout=0.0,
                 activation_dropout=0.0, feat_proj_dropout=0.0, final_dropout=0.0,
                 layerdrop=0.0, mask_time_prob=0.0, mask_feature_prob=0.0, num_labels=3)
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
        _case("llama_padded", ("LlamaConfig", DECODER), "LlamaForCausalLM", "ForCausalLM",
              _padded, "a right-padded batch: attention_mask from the data, labels -100 "
              "at the padding", fused=2),
        _case("llama_left_padded", ("LlamaConfig", DECODER), "LlamaForCausalLM",
              "ForCausalLM", _left_padded, "left-padded: the padding's queries see no key "
              "(zeros, as PyTorch's attention gives them)", fused=2),
        _case("gpt2_padded", ("GPT2Config", dict(vocab_size=VOCAB, n_embd=H, n_layer=2, n_head=4,
                                                 n_positions=64, attn_pdrop=0.0, resid_pdrop=0.0,
                                                 embd_pdrop=0.0, bos_token_id=0, eos_token_id=0)),
              "GPT2LMHeadModel", "ForCausalLM", _padded, "a right-padded batch", fused=2),
        _case("llama_checkpointed", ("LlamaConfig", DECODER), "LlamaForCausalLM",
              "ForCausalLM", _tokens, "gradient_checkpointing_enable(): planned with "
              "--activation-checkpointing=units", checkpointing=True),
        _case("llama_flex", ("LlamaConfig", DECODER), "LlamaForCausalLM", "ForCausalLM",
              _tokens, "attn_implementation flex_attention", attention="flex_attention"),
        _case("mistral", ("MistralConfig", dict(DECODER, sliding_window=8)),
              "MistralForCausalLM", "ForCausalLM", _tokens, "sliding window 8 < T"),
        _case("mistral_padded", ("MistralConfig", dict(DECODER, sliding_window=8)),
              "MistralForCausalLM", "ForCausalLM", _padded, "right-padded under a sliding "
              "window of 8: the last padded queries see no key", fused=2),
        _case("qwen2", ("Qwen2Config", DECODER), "Qwen2ForCausalLM", "ForCausalLM", _tokens,
              "QKV bias"),
        _case("gemma", ("GemmaConfig", dict(DECODER, head_dim=8)), "GemmaForCausalLM",
              "ForCausalLM", _tokens, "tied, scaled embedding"),
        _case("phi", ("PhiConfig", dict(DECODER, resid_pdrop=0.0, embd_pdrop=0.0,
                                        partial_rotary_factor=0.5)),
              "PhiForCausalLM", "ForCausalLM", _tokens, "parallel block, partial RoPE"),
        _case("bert", ("BertConfig", enc), "BertForSequenceClassification",
              "ForSequenceClassification", _tokens),
        _case("bert_padded", ("BertConfig", enc), "BertForSequenceClassification",
              "ForSequenceClassification", _padded, "a padded batch: attention_mask from "
              "the data", fused=2),
        _case("llama_seqcls_padded", ("LlamaConfig", dict(DECODER, num_labels=3, pad_token_id=PAD)),
              "LlamaForSequenceClassification", "ForSequenceClassification", _padded,
              "a reward model's head: the last non-pad token found by argmax", fused=2),
        _case("gpt2_seqcls_padded", ("GPT2Config", dict(vocab_size=VOCAB, n_embd=H, n_layer=2,
                                                        n_head=4, n_positions=64, attn_pdrop=0.0,
                                                        resid_pdrop=0.0, embd_pdrop=0.0,
                                                        num_labels=3, pad_token_id=PAD)),
              "GPT2ForSequenceClassification", "ForSequenceClassification", _padded,
              "the last non-pad token found by argmax", fused=2),
        _case("roberta", ("RobertaConfig", dict(enc, pad_token_id=1)),
              "RobertaForSequenceClassification", "ForSequenceClassification", _tokens),
        _case("t5", ("T5Config", dict(vocab_size=VOCAB, d_model=H, d_kv=8, d_ff=64,
                                      num_layers=2, num_decoder_layers=2, num_heads=4,
                                      dropout_rate=0.0, decoder_start_token_id=0,
                                      pad_token_id=0)),
              "T5ForConditionalGeneration", "ForMaskedLM", _seq2seq,
              "encoder-decoder, relative position buckets"),
        _case("t5_padded", ("T5Config", dict(vocab_size=VOCAB, d_model=H, d_kv=8, d_ff=64,
                                             num_layers=2, num_decoder_layers=2, num_heads=4,
                                             dropout_rate=0.0, decoder_start_token_id=0,
                                             pad_token_id=0)),
              "T5ForConditionalGeneration", "ForMaskedLM", _seq2seq_padded,
              "the encoder's input padded: attention_mask in the encoder and the "
              "cross-attention", fused=6),
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
        _case("opt", ("OPTConfig", dict(vocab_size=VOCAB, hidden_size=H, num_hidden_layers=2,
                                        ffn_dim=64, num_attention_heads=4,
                                        max_position_embeddings=64, word_embed_proj_dim=H,
                                        dropout=0.0, attention_dropout=0.0,
                                        activation_dropout=0.0, layerdrop=0.0)),
              "OPTForCausalLM", "ForCausalLM", _tokens, "learned positions offset by 2"),
        _case("gpt_neox", ("GPTNeoXConfig", dict(vocab_size=VOCAB, hidden_size=H,
                                                 num_hidden_layers=2, num_attention_heads=4,
                                                 intermediate_size=64, rotary_pct=0.25,
                                                 max_position_embeddings=64,
                                                 attention_dropout=0.0, hidden_dropout=0.0)),
              "GPTNeoXForCausalLM", "ForCausalLM", _tokens, "parallel residual, partial RoPE"),
        _case("falcon", ("FalconConfig", dict(vocab_size=VOCAB, hidden_size=H,
                                              num_hidden_layers=2, num_attention_heads=4,
                                              multi_query=True, parallel_attn=True,
                                              attention_dropout=0.0, hidden_dropout=0.0)),
              "FalconForCausalLM", "ForCausalLM", _tokens, "multi-query, parallel attention"),
        _case("bloom", ("BloomConfig", dict(vocab_size=VOCAB, hidden_size=H, n_layer=2,
                                            n_head=4, hidden_dropout=0.0,
                                            attention_dropout=0.0)),
              "BloomForCausalLM", "ForCausalLM", _tokens, "ALiBi"),
        _case("gpt_bigcode", ("GPTBigCodeConfig", dict(vocab_size=VOCAB, n_embd=H, n_layer=2,
                                                       n_head=4, n_positions=64,
                                                       multi_query=True, attn_pdrop=0.0,
                                                       resid_pdrop=0.0, embd_pdrop=0.0,
                                                       bos_token_id=0, eos_token_id=0)),
              "GPTBigCodeForCausalLM", "ForCausalLM", _tokens, "multi-query"),
        _case("gemma2", ("Gemma2Config", dict(DECODER, head_dim=8, sliding_window=8,
                                              attn_logit_softcapping=50.0,
                                              final_logit_softcapping=30.0,
                                              query_pre_attn_scalar=8)),
              "Gemma2ForCausalLM", "ForCausalLM", _tokens, "logit soft-capping"),
        _case("gemma2_flex", ("Gemma2Config", dict(DECODER, head_dim=8, sliding_window=8,
                                                   attn_logit_softcapping=50.0,
                                                   final_logit_softcapping=30.0,
                                                   query_pre_attn_scalar=8)),
              "Gemma2ForCausalLM", "ForCausalLM", _tokens,
              "flex_attention: soft-cap as score_mod, sliding window as mask_mod",
              attention="flex_attention"),
        _case("qwen3", ("Qwen3Config", dict(DECODER, head_dim=8)), "Qwen3ForCausalLM",
              "ForCausalLM", _tokens, "query and key RMSNorm"),
        _case("phi3", ("Phi3Config", dict(DECODER, resid_pdrop=0.0, embd_pdrop=0.0,
                                          pad_token_id=0, bos_token_id=0, eos_token_id=0)),
              "Phi3ForCausalLM", "ForCausalLM", _tokens, "fused QKV and gate-up"),
        _case("distilbert", ("DistilBertConfig", dict(vocab_size=VOCAB, dim=H, n_layers=2,
                                                      n_heads=4, hidden_dim=64, dropout=0.0,
                                                      attention_dropout=0.0,
                                                      seq_classif_dropout=0.0,
                                                      max_position_embeddings=64,
                                                      num_labels=3)),
              "DistilBertForSequenceClassification", "ForSequenceClassification", _tokens),
        _case("albert", ("AlbertConfig", dict(vocab_size=VOCAB, embedding_size=16,
                                              hidden_size=H, num_hidden_layers=2,
                                              num_attention_heads=4, intermediate_size=64,
                                              hidden_dropout_prob=0.0,
                                              attention_probs_dropout_prob=0.0,
                                              classifier_dropout_prob=0.0,
                                              max_position_embeddings=64, num_labels=3)),
              "AlbertForSequenceClassification", "ForSequenceClassification", _tokens,
              "one layer's weights shared by every layer"),
        _case("bart", ("BartConfig", dict(vocab_size=VOCAB, d_model=H, encoder_layers=2,
                                          decoder_layers=2, encoder_attention_heads=4,
                                          decoder_attention_heads=4, encoder_ffn_dim=64,
                                          decoder_ffn_dim=64, max_position_embeddings=64,
                                          dropout=0.0, attention_dropout=0.0,
                                          activation_dropout=0.0, pad_token_id=1,
                                          decoder_start_token_id=0)),
              "BartForConditionalGeneration", "ForMaskedLM", _seq2seq, "encoder-decoder"),
        _case("deberta_v2", ("DebertaV2Config", dict(enc, relative_attention=True,
                                                     position_buckets=8,
                                                     max_relative_positions=16,
                                                     pos_att_type=["p2c", "c2p"],
                                                     pooler_dropout=0.0)),
              "DebertaV2ForSequenceClassification", "ForSequenceClassification", _tokens,
              "disentangled attention, log-bucketed relative positions"),
        _case("electra", ("ElectraConfig", dict(enc, embedding_size=16)),
              "ElectraForSequenceClassification", "ForSequenceClassification", _tokens,
              "embeddings projected to the hidden size"),
        _case("mobilebert", ("MobileBertConfig", dict(enc, embedding_size=16,
                                                      intra_bottleneck_size=16,
                                                      true_hidden_size=16,
                                                      num_feedforward_networks=2)),
              "MobileBertForSequenceClassification", "ForSequenceClassification", _tokens,
              "bottlenecks, stacked feed-forwards, NoNorm"),
        _case("gptj", ("GPTJConfig", dict(vocab_size=VOCAB, n_embd=H, n_layer=2, n_head=4,
                                          n_positions=64, rotary_dim=4, attn_pdrop=0.0,
                                          resid_pdrop=0.0, embd_pdrop=0.0, bos_token_id=0,
                                          eos_token_id=0)),
              "GPTJForCausalLM", "ForCausalLM", _tokens, "interleaved RoPE"),
        _case("starcoder2", ("Starcoder2Config", dict(DECODER, residual_dropout=0.0,
                                                      embedding_dropout=0.0, sliding_window=8,
                                                      bos_token_id=0, eos_token_id=0)),
              "Starcoder2ForCausalLM", "ForCausalLM", _tokens, "sliding window, biases"),
        _case("olmo", ("OlmoConfig", dict(DECODER, pad_token_id=0, bos_token_id=0,
                                          eos_token_id=0, clip_qkv=8.0)),
              "OlmoForCausalLM", "ForCausalLM", _tokens,
              "non-parametric LayerNorm, QKV clipping"),
        _case("cohere", ("CohereConfig", dict(DECODER, pad_token_id=0, bos_token_id=0,
                                              eos_token_id=0, use_qk_norm=True)),
              "CohereForCausalLM", "ForCausalLM", _tokens,
              "parallel block, per-head query/key LayerNorm, logit scale"),
        _case("mt5", ("MT5Config", dict(vocab_size=VOCAB, d_model=H, d_kv=8, d_ff=64,
                                        num_layers=2, num_decoder_layers=2, num_heads=4,
                                        dropout_rate=0.0, decoder_start_token_id=0,
                                        pad_token_id=0)),
              "MT5ForConditionalGeneration", "ForMaskedLM", _seq2seq, "gated GELU, untied head"),
        # Vision (32x32 images, 3 classes).
        _case("swin", ("SwinConfig", dict(img, patch_size=4, embed_dim=16, depths=[1, 1],
                                          num_heads=[2, 4], window_size=4,
                                          hidden_dropout_prob=0.0,
                                          attention_probs_dropout_prob=0.0,
                                          drop_path_rate=0.0)),
              "SwinForImageClassification", "ForSequenceClassification", _images,
              "shifted windows, patch merging"),
        _case("convnext", ("ConvNextConfig", dict(img, patch_size=4, num_stages=2,
                                                  hidden_sizes=[16, 32], depths=[1, 1],
                                                  drop_path_rate=0.0)),
              "ConvNextForImageClassification", "ForSequenceClassification", _images,
              "depthwise 7x7, channels-last LayerNorm, layer scale"),
        _case("beit", ("BeitConfig", dict(img, patch_size=8, hidden_size=H, num_hidden_layers=2,
                                          num_attention_heads=4, intermediate_size=64,
                                          hidden_dropout_prob=0.0,
                                          attention_probs_dropout_prob=0.0,
                                          drop_path_rate=0.0,
                                          use_relative_position_bias=True)),
              "BeitForImageClassification", "ForSequenceClassification", _images,
              "relative position bias, layer scale, mean pooling"),
        _case("deit", ("DeiTConfig", dict(img, patch_size=8, hidden_size=H, num_hidden_layers=2,
                                          num_attention_heads=4, intermediate_size=64,
                                          hidden_dropout_prob=0.0,
                                          attention_probs_dropout_prob=0.0)),
              "DeiTForImageClassification", "ForSequenceClassification", _images),
        _case("dinov2", ("Dinov2Config", dict(img, patch_size=8, hidden_size=H,
                                              num_hidden_layers=2, num_attention_heads=4,
                                              mlp_ratio=2, hidden_dropout_prob=0.0,
                                              attention_probs_dropout_prob=0.0,
                                              drop_path_rate=0.0)),
              "Dinov2ForImageClassification", "ForSequenceClassification", _images,
              "interpolated position embeddings, CLS and mean-pooled head"),
        # Speech: a convolutional feature encoder over the raw waveform,
        # then a transformer (wav2vec2's positional convolution is
        # weight-normed). SpecAugment off (mask_time_prob=0): transformers
        # draws its masks with numpy.random, which the tracer refuses.
        _case("wav2vec2", ("Wav2Vec2Config", dict(audio, feat_extract_norm="group")),
              "Wav2Vec2ForSequenceClassification", "ForSequenceClassification", _waveform,
              "raw waveform, conv feature encoder, SpecAugment off"),
        _case("hubert", ("HubertConfig", dict(audio, feat_extract_norm="layer",
                                              do_stable_layer_norm=True)),
              "HubertForSequenceClassification", "ForSequenceClassification", _waveform,
              "pre-norm layers, layer-normed conv features"),
        _case("whisper", ("WhisperConfig", dict(vocab_size=VOCAB, num_mel_bins=8, d_model=H,
                                                encoder_layers=2, decoder_layers=2,
                                                encoder_attention_heads=4,
                                                decoder_attention_heads=4, encoder_ffn_dim=64,
                                                decoder_ffn_dim=64, max_source_positions=16,
                                                max_target_positions=T, dropout=0.0,
                                                attention_dropout=0.0, activation_dropout=0.0,
                                                decoder_start_token_id=0, pad_token_id=0,
                                                bos_token_id=0, eos_token_id=0)),
              "WhisperForConditionalGeneration", "ForMaskedLM", _features,
              "log-mel features, conv stem, encoder-decoder"),
        _case("granite", ("GraniteConfig", dict(DECODER, embedding_multiplier=2.0,
                                                residual_multiplier=0.5,
                                                attention_multiplier=0.2, logits_scaling=4.0)),
              "GraniteForCausalLM", "ForCausalLM", _tokens,
              "embedding, residual, attention and logit multipliers"),
        _case("stablelm", ("StableLmConfig", dict(DECODER, partial_rotary_factor=0.25,
                                                  use_qkv_bias=True, hidden_dropout=0.0)),
              "StableLmForCausalLM", "ForCausalLM", _tokens, "LayerNorm, partial RoPE, QKV bias"),
        _case("nemotron", ("NemotronConfig", dict(DECODER, head_dim=8, partial_rotary_factor=0.5,
                                                  hidden_act="relu2")),
              "NemotronForCausalLM", "ForCausalLM", _tokens,
              "squared-ReLU MLP, LayerNorm1P, partial RoPE"),
        _case("modernbert", ("ModernBertConfig", dict(vocab_size=VOCAB, hidden_size=H,
                                                      intermediate_size=64,
                                                      num_hidden_layers=3,
                                                      num_attention_heads=4,
                                                      max_position_embeddings=64,
                                                      global_attn_every_n_layers=2,
                                                      local_attention=8, num_labels=3,
                                                      attention_dropout=0.0,
                                                      embedding_dropout=0.0, mlp_dropout=0.0,
                                                      classifier_dropout=0.0,
                                                      pad_token_id=0)),
              "ModernBertForSequenceClassification", "ForSequenceClassification", _tokens,
              "alternating global and local attention, GeGLU, no biases"),
        _case("regnet", ("RegNetConfig", dict(num_channels=3, embedding_size=16,
                                              hidden_sizes=[16, 32], depths=[1, 1],
                                              groups_width=8, num_labels=3)),
              "RegNetForImageClassification", "ForSequenceClassification", _images,
              "grouped convolutions, squeeze-excitation"),
        _case("resnet_hf", ("ResNetConfig", dict(num_channels=3, num_labels=3,
                                                 embedding_size=16, hidden_sizes=[16, 32],
                                                 depths=[1, 1], layer_type="bottleneck")),
              "ResNetForImageClassification", "ForSequenceClassification", _images),
        _case("segformer", ("SegformerConfig", dict(img, num_encoder_blocks=2, depths=[1, 1],
                                                    sr_ratios=[2, 1], hidden_sizes=[16, 32],
                                                    patch_sizes=[7, 3], strides=[4, 2],
                                                    num_attention_heads=[1, 2],
                                                    mlp_ratios=[2, 2],
                                                    hidden_dropout_prob=0.0,
                                                    attention_probs_dropout_prob=0.0,
                                                    classifier_dropout_prob=0.0,
                                                    drop_path_rate=0.0)),
              "SegformerForImageClassification", "ForSequenceClassification", _images,
              "overlapping patches, spatially reduced attention, Mix-FFN"),
        # Image features scattered into the text embeddings at the
        # placeholder tokens (masked_scatter), a CLIP tower and a Llama.
        _case("llava", ("LlavaConfig", dict(
            vision_config=dict(model_type="clip_vision_model", hidden_size=H,
                               intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                               image_size=16, patch_size=8, attention_dropout=0.0),
            text_config=dict(DECODER, model_type="llama"), image_token_id=IMAGE_TOKEN,
            vision_feature_layer=-1)),
              "LlavaForConditionalGeneration", "ForCausalLM", _image_and_tokens,
              "image features into the placeholders (masked_scatter)"),
        _case("gemma3", ("Gemma3TextConfig", dict(DECODER, head_dim=8, sliding_window=8,
                                                  query_pre_attn_scalar=8,
                                                  num_hidden_layers=3, layer_types=[
                                                      "sliding_attention", "full_attention",
                                                      "sliding_attention"])),
              "Gemma3ForCausalLM", "ForCausalLM", _tokens,
              "local and global layers, query/key RMSNorm"),
        _case("deepseek_v3", ("DeepseekV3Config", dict(
            moe, num_attention_heads=4, num_key_value_heads=4, moe_intermediate_size=16,
            first_k_dense_replace=1, n_routed_experts=4, num_experts_per_tok=2, n_group=2,
            topk_group=1, n_shared_experts=1, kv_lora_rank=16, q_lora_rank=16,
            qk_rope_head_dim=4, qk_nope_head_dim=4, v_head_dim=8)),
              "DeepseekV3ForCausalLM", "ForCausalLM", _tokens,
              "multi-head latent attention, group-limited top-2 of 4 experts, batched_mm"),
        _case("qwen3_moe", ("Qwen3MoeConfig", dict(moe, head_dim=8, num_experts=4,
                                                   num_experts_per_tok=2,
                                                   moe_intermediate_size=32)),
              "Qwen3MoeForCausalLM", "ForCausalLM", _tokens, "4 experts, top-2, batched_mm"),
        _case("olmo2", ("Olmo2Config", dict(DECODER, pad_token_id=0, bos_token_id=0,
                                            eos_token_id=0)),
              "Olmo2ForCausalLM", "ForCausalLM", _tokens, "post-norm, query/key RMSNorm"),
        _case("mamba", ("MambaConfig", dict(vocab_size=VOCAB, hidden_size=H, state_size=4,
                                            num_hidden_layers=2, expand=2, conv_kernel=4,
                                            use_mambapy=False)),
              "MambaForCausalLM", "ForCausalLM", _tokens,
              "selective state space, causal depthwise conv"),
        _case("mamba2", ("Mamba2Config", dict(vocab_size=VOCAB, hidden_size=H, state_size=4,
                                              num_heads=4, head_dim=16, n_groups=1, expand=2,
                                              chunk_size=8, num_hidden_layers=2)),
              "Mamba2ForCausalLM", "ForCausalLM", _tokens, "state space duality, chunked"),
        _case("jamba", ("JambaConfig", dict(moe, num_hidden_layers=2, attn_layer_period=2,
                                            attn_layer_offset=1, expert_layer_period=2,
                                            expert_layer_offset=1, num_experts=4,
                                            num_experts_per_tok=2, mamba_d_state=4,
                                            mamba_d_conv=4, mamba_expand=2,
                                            mamba_dt_rank=4)),
              "JambaForCausalLM", "ForCausalLM", _tokens, "Mamba and attention layers, MoE"),
        _case("gpt_oss", ("GptOssConfig", dict(moe, head_dim=8, num_local_experts=4,
                                               num_experts_per_tok=2, sliding_window=8)),
              "GptOssForCausalLM", "ForCausalLM", _tokens,
              "attention sinks, alternating sliding window, MoE"),
        _case("llama4", ("Llama4TextConfig", dict(moe, head_dim=8, num_local_experts=4,
                                                  num_experts_per_tok=1,
                                                  intermediate_size_mlp=64,
                                                  attention_chunk_size=8,
                                                  interleave_moe_layer_step=1,
                                                  no_rope_layers=[1, 0])),
              "Llama4ForCausalLM", "ForCausalLM", _tokens,
              "chunked attention, layers without RoPE, routed and shared experts"),
        _case("rwkv", ("RwkvConfig", dict(vocab_size=VOCAB, hidden_size=H, num_hidden_layers=2,
                                          attention_hidden_size=H, intermediate_size=64,
                                          context_length=64)),
              "RwkvForCausalLM", "ForCausalLM", _tokens, "WKV recurrence, token shift"),
        _case("zamba2", ("Zamba2Config", dict(vocab_size=VOCAB, hidden_size=H,
                                              num_hidden_layers=2, layers_block_type=[
                                                  "mamba", "hybrid"],
                                              mamba_d_state=4, mamba_headdim=8, n_mamba_heads=8,
                                              num_attention_heads=4, num_key_value_heads=4,
                                              intermediate_size=64, attention_dropout=0.0,
                                              chunk_size=8, use_mem_rope=True,
                                              hybrid_layer_ids=[1], num_mem_blocks=1,
                                              pad_token_id=0, bos_token_id=0, eos_token_id=0)),
              "Zamba2ForCausalLM", "ForCausalLM", _tokens,
              "Mamba2 layers and a shared attention block"),
        _case("levit", ("LevitConfig", dict(image_size=32, num_channels=3, num_labels=3,
                                            hidden_sizes=[16, 32], num_attention_heads=[2, 2],
                                            depths=[1, 1], key_dim=[8, 8], drop_path_rate=0,
                                            mlp_ratio=[2, 2], attention_ratio=[2, 2],
                                            down_ops=[["Subsample", 8, 2, 2, 2, 2]])),
              "LevitForImageClassification", "ForSequenceClassification", _images,
              "attention biases by offset, hard-swish, subsampling attention"),
    ] + _more_cases(img, audio, enc)


def _more_cases(img, audio, enc):
    """More architectures (2026-11-30), each with what it adds; dropouts
    zeroed by _no_dropout whatever their names."""
    SC, CL, ML = "ForSequenceClassification", "ForCausalLM", "ForMaskedLM"
    s2s = dict(vocab_size=VOCAB, d_model=H, encoder_layers=2, decoder_layers=2,
               encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
               decoder_ffn_dim=64, max_position_embeddings=64, pad_token_id=1,
               decoder_start_token_id=0)
    moe = dict(DECODER, experts_implementation="batched_mm")
    rows = [
        ("xlnet", "XLNetConfig", dict(vocab_size=VOCAB, d_model=H, n_layer=2, n_head=4,
                                      d_inner=64, num_labels=3),
         "XLNetForSequenceClassification", SC, _tokens, "two-stream relative attention"),
        ("funnel", "FunnelConfig", dict(vocab_size=VOCAB, block_sizes=[1, 1], d_model=H,
                                        n_head=4, d_head=8, d_inner=64, num_labels=3),
         "FunnelForSequenceClassification", SC, _tokens, "pooled query blocks"),
        ("big_bird", "BigBirdConfig", dict(enc, attention_type="original_full"),
         "BigBirdForSequenceClassification", SC, _tokens, ""),
        ("esm", "EsmConfig", dict(enc, position_embedding_type="rotary", pad_token_id=1,
                                  mask_token_id=2),
         "EsmForSequenceClassification", SC, _tokens, "protein encoder, rotary"),
        ("convbert", "ConvBertConfig", dict(enc, embedding_size=H),
         "ConvBertForSequenceClassification", SC, _tokens, "span-based dynamic convolution"),
        ("codegen", "CodeGenConfig", dict(vocab_size=VOCAB, n_embd=H, n_layer=2, n_head=4,
                                          n_positions=64, rotary_dim=4, bos_token_id=0,
                                          eos_token_id=0),
         "CodeGenForCausalLM", CL, _tokens, "fused QKV in mp blocks"),
        ("gpt_neo", "GPTNeoConfig", dict(vocab_size=VOCAB, hidden_size=H, num_layers=2,
                                         attention_types=[[["global", "local"], 1]],
                                         num_heads=4, intermediate_size=64, window_size=8,
                                         max_position_embeddings=64),
         "GPTNeoForCausalLM", CL, _tokens, "global and local attention layers"),
        ("olmoe", "OlmoeConfig", dict(moe, num_experts=4, num_experts_per_tok=2),
         "OlmoeForCausalLM", CL, _tokens, "MoE, batched_mm"),
        ("bamba", "BambaConfig", dict(DECODER, mamba_n_heads=4, mamba_d_head=16,
                                      mamba_d_state=8, mamba_chunk_size=8,
                                      attn_layer_indices=[1], mamba_n_groups=1),
         "BambaForCausalLM", CL, _tokens, "Mamba2 and attention layers"),
        ("falcon_mamba", "FalconMambaConfig", dict(vocab_size=VOCAB, hidden_size=H,
                                                   num_hidden_layers=2, state_size=8, expand=2,
                                                   conv_kernel=4),
         "FalconMambaForCausalLM", CL, _tokens, "selective scan, RMS-normed B, C, dt"),
        ("recurrent_gemma", "RecurrentGemmaConfig", dict(vocab_size=VOCAB, hidden_size=H,
                                                         num_hidden_layers=3,
                                                         num_attention_heads=4,
                                                         num_key_value_heads=1,
                                                         intermediate_size=64, lru_width=H,
                                                         attention_window_size=8, head_dim=8),
         "RecurrentGemmaForCausalLM", CL, _tokens, "RG-LRU recurrence, local attention"),
        ("lfm2", "Lfm2Config", dict(vocab_size=VOCAB, hidden_size=H, num_hidden_layers=2,
                                    num_attention_heads=4, num_key_value_heads=2,
                                    intermediate_size=64, max_position_embeddings=64,
                                    full_attn_idxs=[1]),
         "Lfm2ForCausalLM", CL, _tokens, "gated short convolutions and attention"),
        ("mbart", "MBartConfig", s2s, "MBartForConditionalGeneration", ML, _seq2seq,
         "pre-norm encoder-decoder"),
        ("umt5", "UMT5Config", dict(vocab_size=VOCAB, d_model=H, d_kv=8, d_ff=64, num_layers=2,
                                    num_decoder_layers=2, num_heads=4,
                                    decoder_start_token_id=0, pad_token_id=0),
         "UMT5ForConditionalGeneration", ML, _seq2seq, "relative buckets in every layer"),
        ("swinv2", "Swinv2Config", dict(img, patch_size=4, embed_dim=16, depths=[1, 1],
                                        num_heads=[2, 4], window_size=4),
         "Swinv2ForImageClassification", SC, _images, "cosine attention, log-spaced CPB"),
        ("mobilevit", "MobileViTConfig", dict(img, hidden_sizes=[16, 24, 32],
                                              neck_hidden_sizes=[8, 8, 16, 16, 24, 24, 64]),
         "MobileViTForImageClassification", SC, _images, "unfolded patches through attention"),
        ("pvt_v2", "PvtV2Config", dict(img, hidden_sizes=[16, 32, 32, 32], depths=[1, 1, 1, 1],
                                       num_attention_heads=[1, 2, 2, 2]),
         "PvtV2ForImageClassification", SC, _images, "spatial-reduction attention"),
        ("focalnet", "FocalNetConfig", dict(img, patch_size=4, embed_dim=16, depths=[1, 1],
                                            focal_levels=[2, 2], focal_windows=[3, 3]),
         "FocalNetForImageClassification", SC, _images, "focal modulation"),
        ("wavlm", "WavLMConfig", dict(audio, num_buckets=16, max_bucket_distance=32),
         "WavLMForSequenceClassification", SC, _waveform, "gated relative position bias"),
        ("w2v2_conformer", "Wav2Vec2ConformerConfig", dict(audio,
                                                           position_embeddings_type="rotary"),
         "Wav2Vec2ConformerForSequenceClassification", SC, _waveform,
         "conformer blocks, rotary"),
    ]
    return [_case(name, (config, kw), cls, kind, inputs, note)
            for name, config, kw, cls, kind, inputs, note in rows]
