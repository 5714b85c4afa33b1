"""Real architectures nobody here wrote: `transformers` model definitions and `torch.nn` modules.

Each entry builds one architecture from its library's own code with a small
config and seeded random weights (nothing is downloaded), plus example
inputs, so that the whole compile path can be checked against eager on
models that were not tuned for it:

    model, args = etmlir.models.architectures.build("llama")

`transformers` is imported only when a `transformers` entry is built (it is a
test dependency, not a runtime one). A `transformers` model returns a
`ModelOutput`; the zoo wraps it to return the named fields as a tuple of
tensors, which is what the coverage table compares.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

VOCAB = 128
SEQ = 8
IMAGE = 32


@dataclasses.dataclass(frozen=True)
class Architecture:
    name: str
    family: str          # "decoder LLM", "encoder", "encoder-decoder", "vision CNN", "vision transformer", ...
    source: str          # the class the model is built from
    make: Callable[[], tuple[nn.Module, tuple[Any, ...]]]


class Fields(nn.Module):
    """`model(**dict(zip(arg_names, args)))`'s output fields `names`, as a tuple of tensors."""

    def __init__(self, model: nn.Module, names: tuple[str, ...], arg_names: tuple[str, ...] = ()) -> None:
        super().__init__()
        self.model, self.names, self.arg_names = model, names, arg_names

    def forward(self, *args: torch.Tensor) -> tuple[torch.Tensor, ...]:
        out = self.model(**dict(zip(self.arg_names, args))) if self.arg_names else self.model(*args)
        return tuple(out[name] for name in self.names)


def _hf(class_name: str, config_name: str, fields: tuple[str, ...], inputs: Callable[[], tuple[Any, ...]],
        part: str | None = None, arg_names: tuple[str, ...] = (), reinit: bool = False, **config: Any
        ) -> Callable[[], tuple[nn.Module, tuple[Any, ...]]]:
    """A `transformers` model built from its config; `part` picks a submodule (`"encoder"`), `arg_names`
    passes the inputs by keyword, `reinit` replaces the library's initialisation (see `seeded_init`)."""
    def make() -> tuple[nn.Module, tuple[Any, ...]]:
        transformers = importlib.import_module("transformers")
        torch.manual_seed(0)
        model = getattr(transformers, class_name)(getattr(transformers, config_name)(**config)).eval()
        if part is not None:
            model = getattr(model, part)
        if reinit:
            seeded_init(model)
        return Fields(model, fields, arg_names), inputs()
    return make


def seeded_init(model: nn.Module) -> None:
    """Seeded fan-in-scaled weights and non-trivial batch-norm statistics, in place.

    Some libraries' initialisations make a deep CNN's output vanish (MobileNetV2's and
    EfficientNet's pooled features are all below 1e-24 with `transformers`' init), and a
    comparison with eager on zeros proves nothing.
    """
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, tensor in list(model.named_parameters()) + list(model.named_buffers()):
            if not tensor.is_floating_point():
                continue
            if name.endswith("running_var"):
                tensor.copy_(torch.rand(tensor.shape, generator=generator) + 0.5)
            elif name.endswith("running_mean") or tensor.dim() == 1:
                tensor.copy_(torch.randn(tensor.shape, generator=generator) * 0.1
                             + (1.0 if name.endswith("weight") else 0.0))
            elif tensor.dim() > 1:
                fan_in = tensor[0].numel()
                tensor.copy_(torch.randn(tensor.shape, generator=generator) / fan_in ** 0.5)


def _token_ids() -> tuple[torch.Tensor]:
    return (torch.randint(0, VOCAB, (1, SEQ)),)


def _image(channels: int = 3, size: int = IMAGE) -> Callable[[], tuple[torch.Tensor]]:
    return lambda: (torch.randn(1, channels, size, size),)


def _audio_features() -> tuple[torch.Tensor]:
    return (torch.randn(1, 16, 32),)       # [batch, mel bins, frames]


def _waveform() -> tuple[torch.Tensor]:
    return (torch.randn(1, 800),)


def _encoder_decoder_ids() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randint(0, VOCAB, (1, SEQ)), torch.randint(0, VOCAB, (1, 4))


# Small decoder-LLM configs share these; each family adds what its config names differently.
_LLM = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
            max_position_embeddings=64)
_ENCODER = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                max_position_embeddings=64)
_VIT = dict(image_size=IMAGE, patch_size=8, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=64)


def _llm(class_name: str, config_name: str, **extra: Any) -> Callable[[], tuple[nn.Module, tuple[Any, ...]]]:
    return _hf(class_name, config_name, ("logits",), _token_ids, **{**_LLM, **extra})


class _TorchRNN(nn.Module):
    def __init__(self, cell: type[nn.Module]) -> None:
        super().__init__()
        self.rnn = cell(16, 32, num_layers=2, batch_first=True)
        self.head = nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y, state = self.rnn(x)
        h = state[0] if isinstance(state, tuple) else state
        return self.head(y), h


class _TorchTransformerEncoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.encoder(x)


class _TorchMultiheadAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(32, 4, batch_first=True)

    def forward(self, q: torch.Tensor, kv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.attn(q, kv, kv, need_weights=True)


def _torch(make_model: Callable[[], nn.Module], inputs: Callable[[], tuple[Any, ...]]
           ) -> Callable[[], tuple[nn.Module, tuple[Any, ...]]]:
    def make() -> tuple[nn.Module, tuple[Any, ...]]:
        torch.manual_seed(0)
        return make_model().eval(), inputs()
    return make


ARCHITECTURES: dict[str, Architecture] = {a.name: a for a in [
    # Decoder-only LLMs.
    Architecture("llama", "decoder LLM (rotary, GQA, RMSNorm, SwiGLU)", "transformers.LlamaForCausalLM",
                 _llm("LlamaForCausalLM", "LlamaConfig", num_key_value_heads=2)),
    Architecture("qwen2", "decoder LLM (rotary, GQA, qkv bias)", "transformers.Qwen2ForCausalLM",
                 _llm("Qwen2ForCausalLM", "Qwen2Config", num_key_value_heads=2)),
    Architecture("qwen3", "decoder LLM (rotary, GQA, q/k norm)", "transformers.Qwen3ForCausalLM",
                 _llm("Qwen3ForCausalLM", "Qwen3Config", num_key_value_heads=2, head_dim=8)),
    Architecture("mistral", "decoder LLM (rotary, GQA, sliding window)", "transformers.MistralForCausalLM",
                 _llm("MistralForCausalLM", "MistralConfig", num_key_value_heads=2)),
    Architecture("gemma", "decoder LLM (rotary, MQA, GeGLU, scaled embedding)", "transformers.GemmaForCausalLM",
                 _llm("GemmaForCausalLM", "GemmaConfig", num_key_value_heads=1, head_dim=8)),
    Architecture("phi3", "decoder LLM (fused qkv, partial rotary)", "transformers.Phi3ForCausalLM",
                 _llm("Phi3ForCausalLM", "Phi3Config", num_key_value_heads=2, pad_token_id=0, bos_token_id=0,
                      eos_token_id=0)),
    Architecture("gpt2", "decoder LLM (learned positions, Conv1D, GELU)", "transformers.GPT2LMHeadModel",
                 _hf("GPT2LMHeadModel", "GPT2Config", ("logits",), _token_ids, vocab_size=VOCAB, n_embd=32,
                     n_layer=2, n_head=4, n_positions=64, bos_token_id=0, eos_token_id=0)),
    Architecture("gpt_neox", "decoder LLM (parallel residual, partial rotary)", "transformers.GPTNeoXForCausalLM",
                 _llm("GPTNeoXForCausalLM", "GPTNeoXConfig", bos_token_id=0, eos_token_id=0)),
    Architecture("opt", "decoder LLM (learned offset positions, ReLU)", "transformers.OPTForCausalLM",
                 _hf("OPTForCausalLM", "OPTConfig", ("logits",), _token_ids, vocab_size=VOCAB, hidden_size=32,
                     ffn_dim=64, num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=64,
                     word_embed_proj_dim=32, pad_token_id=1, bos_token_id=0, eos_token_id=0)),
    Architecture("bloom", "decoder LLM (ALiBi)", "transformers.BloomForCausalLM",
                 _hf("BloomForCausalLM", "BloomConfig", ("logits",), _token_ids, vocab_size=VOCAB, hidden_size=32,
                     n_layer=2, n_head=4, bos_token_id=0, eos_token_id=0, pad_token_id=0)),
    Architecture("falcon", "decoder LLM (multi-query, parallel attention)", "transformers.FalconForCausalLM",
                 _hf("FalconForCausalLM", "FalconConfig", ("logits",), _token_ids, vocab_size=VOCAB, hidden_size=32,
                     num_hidden_layers=2, num_attention_heads=4, bos_token_id=0, eos_token_id=0)),
    # Encoders.
    Architecture("bert", "encoder (absolute positions, token types, pooler)", "transformers.BertModel",
                 _hf("BertModel", "BertConfig", ("last_hidden_state", "pooler_output"), _token_ids, **_ENCODER)),
    Architecture("distilbert", "encoder (no token types)", "transformers.DistilBertModel",
                 _hf("DistilBertModel", "DistilBertConfig", ("last_hidden_state",), _token_ids, vocab_size=VOCAB,
                     dim=32, n_layers=2, n_heads=4, hidden_dim=64, max_position_embeddings=64)),
    Architecture("roberta", "encoder (padding-offset positions)", "transformers.RobertaModel",
                 _hf("RobertaModel", "RobertaConfig", ("last_hidden_state",), _token_ids,
                     **{**_ENCODER, "max_position_embeddings": 72, "pad_token_id": 1})),
    Architecture("albert", "encoder (shared layers, factorized embedding)", "transformers.AlbertModel",
                 _hf("AlbertModel", "AlbertConfig", ("last_hidden_state", "pooler_output"), _token_ids,
                     **{**_ENCODER, "embedding_size": 16})),
    Architecture("electra", "encoder (embedding projection)", "transformers.ElectraModel",
                 _hf("ElectraModel", "ElectraConfig", ("last_hidden_state",), _token_ids,
                     **{**_ENCODER, "embedding_size": 16})),
    Architecture("deberta_v2", "encoder (disentangled relative attention)", "transformers.DebertaV2Model",
                 _hf("DebertaV2Model", "DebertaV2Config", ("last_hidden_state",), _token_ids, **_ENCODER)),
    # Encoder-decoders.
    Architecture("t5", "encoder-decoder (relative position buckets, RMSNorm)",
                 "transformers.T5ForConditionalGeneration",
                 _hf("T5ForConditionalGeneration", "T5Config", ("logits",), _encoder_decoder_ids,
                     arg_names=("input_ids", "decoder_input_ids"), vocab_size=VOCAB,
                     d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4, decoder_start_token_id=0)),
    Architecture("bart", "encoder-decoder (learned positions, GELU)", "transformers.BartForConditionalGeneration",
                 _hf("BartForConditionalGeneration", "BartConfig", ("logits",), _encoder_decoder_ids,
                     arg_names=("input_ids", "decoder_input_ids"),
                     vocab_size=VOCAB, d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4,
                     decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64)),
    # Vision CNNs.
    Architecture("resnet", "vision CNN (bottleneck residuals, batch norm)", "transformers.ResNetModel",
                 _hf("ResNetModel", "ResNetConfig", ("pooler_output",), _image(), embedding_size=16,
                     hidden_sizes=[16, 32], depths=[1, 1])),
    Architecture("convnext", "vision CNN (depthwise 7x7, layer norm)", "transformers.ConvNextModel",
                 _hf("ConvNextModel", "ConvNextConfig", ("pooler_output",), _image(), hidden_sizes=[16, 32],
                     depths=[1, 1], num_stages=2)),
    Architecture("mobilenet_v2", "vision CNN (inverted residuals, ReLU6)", "transformers.MobileNetV2Model",
                 _hf("MobileNetV2Model", "MobileNetV2Config", ("pooler_output",), _image(), image_size=IMAGE,
                     reinit=True, depth_multiplier=0.35)),
    Architecture("regnet", "vision CNN (grouped convs, squeeze-excite)", "transformers.RegNetModel",
                 _hf("RegNetModel", "RegNetConfig", ("pooler_output",), _image(), embedding_size=16,
                     hidden_sizes=[16, 32], depths=[1, 1], groups_width=8)),
    Architecture("efficientnet", "vision CNN (MBConv, swish, squeeze-excite)", "transformers.EfficientNetModel",
                 _hf("EfficientNetModel", "EfficientNetConfig", ("pooler_output",), _image(), image_size=IMAGE, reinit=True,
                     width_coefficient=0.25, depth_coefficient=0.25, hidden_dim=320)),
    # Vision transformers.
    Architecture("vit", "vision transformer (patch embedding, class token)", "transformers.ViTModel",
                 _hf("ViTModel", "ViTConfig", ("last_hidden_state",), _image(), **_VIT)),
    Architecture("deit", "vision transformer (distillation token)", "transformers.DeiTModel",
                 _hf("DeiTModel", "DeiTConfig", ("last_hidden_state",), _image(), **_VIT)),
    Architecture("dinov2", "vision transformer (layer scale, interpolated positions)", "transformers.Dinov2Model",
                 _hf("Dinov2Model", "Dinov2Config", ("last_hidden_state",), _image(),
                     **{**_VIT, "mlp_ratio": 2})),
    Architecture("swin", "windowed-attention vision transformer (shifted windows)", "transformers.SwinModel",
                 _hf("SwinModel", "SwinConfig", ("last_hidden_state",), _image(), image_size=IMAGE, patch_size=4,
                     embed_dim=16, depths=[1, 1], num_heads=[2, 2], window_size=4)),
    Architecture("beit", "vision transformer (relative position bias)", "transformers.BeitModel",
                 _hf("BeitModel", "BeitConfig", ("last_hidden_state",), _image(),
                     **{**_VIT, "use_relative_position_bias": True})),
    Architecture("levit", "vision transformer (batch-norm linears, attention-bias table, subsampling)",
                 "transformers.LevitModel",
                 _hf("LevitModel", "LevitConfig", ("last_hidden_state",), _image(size=64), image_size=64,
                     reinit=True, hidden_sizes=[16, 24, 32], num_attention_heads=[2, 2, 2], depths=[1, 1, 1],
                     key_dim=[8, 8, 8], mlp_ratio=[2, 2, 2], attention_ratio=[2, 2, 2])),
    Architecture("mobilevit_v2", "hybrid CNN / transformer (unfold and fold to patches, separable attention)",
                 "transformers.MobileViTV2Model",
                 _hf("MobileViTV2Model", "MobileViTV2Config", ("pooler_output",), _image(size=64), image_size=64,
                     reinit=True, width_multiplier=0.25)),
    # Audio front ends.
    Architecture("whisper_encoder", "audio encoder (conv front end, sinusoidal positions)",
                 "transformers.WhisperModel.encoder",
                 _hf("WhisperModel", "WhisperConfig", ("last_hidden_state",), _audio_features, part="encoder", vocab_size=VOCAB,
                     num_mel_bins=16, d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4,
                     decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_source_positions=16,
                     max_target_positions=16, pad_token_id=0, bos_token_id=0, eos_token_id=0, decoder_start_token_id=0)),
    Architecture("wav2vec2", "audio encoder (conv feature extractor, positional conv)", "transformers.Wav2Vec2Model",
                 _hf("Wav2Vec2Model", "Wav2Vec2Config", ("last_hidden_state",), _waveform, hidden_size=32,
                     num_hidden_layers=1, num_attention_heads=4, intermediate_size=64,
                     conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3), num_feat_extract_layers=2,
                     num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4)),
    # torch.nn's own.
    Architecture("nn_lstm", "recurrent (2-layer LSTM)", "torch.nn.LSTM",
                 _torch(lambda: _TorchRNN(nn.LSTM), lambda: (torch.randn(1, 6, 16),))),
    Architecture("nn_gru", "recurrent (2-layer GRU)", "torch.nn.GRU",
                 _torch(lambda: _TorchRNN(nn.GRU), lambda: (torch.randn(1, 6, 16),))),
    Architecture("nn_transformer_encoder", "encoder (pre-norm)", "torch.nn.TransformerEncoder",
                 _torch(_TorchTransformerEncoder, lambda: (torch.randn(1, SEQ, 32),))),
    Architecture("nn_multihead_attention", "cross-attention with weights", "torch.nn.MultiheadAttention",
                 _torch(_TorchMultiheadAttention, lambda: (torch.randn(1, 4, 32), torch.randn(1, SEQ, 32)))),
]}


def build(name: str) -> tuple[nn.Module, tuple[Any, ...]]:
    """(model in eval mode, example args) for architecture `name`; weights and inputs are seeded."""
    if name not in ARCHITECTURES:
        raise KeyError(f"no architecture '{name}'; available: {', '.join(ARCHITECTURES)}")
    return ARCHITECTURES[name].make()
