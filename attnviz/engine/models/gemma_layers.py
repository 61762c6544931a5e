"""The Gemma way of an LLM layer (Gemma 2 and 3), written as what differs from the Llama way (``llm_layers``): an
RMSNorm scaling by ``1 + weight`` before casting back, four norms a layer (the attention block's output and the
feed-forward's are normed again before the residual adds them), the embedding scaled by sqrt(D). The way
transformers' modular model files override only what differs, so a third layer form is a third small module
(CONTRIBUTING.md says which files a new family touches)."""

from __future__ import annotations

import torch
from torch import Tensor

from attnviz.engine.config import ModelConfig
from attnviz.engine.models.llm_arch import LLMArch
from attnviz.engine.models.llm_layers import LLMLayer, RMSNorm
from attnviz.engine.models.protocol import AttentionBlock, BlockNorm


class GemmaRMSNorm(RMSNorm):
    """x / rms(x) times ``1 + weight`` (zero-initialised), scaled at float32 and then cast back."""

    @staticmethod
    def initial_weight(dim: int) -> Tensor:
        return torch.zeros(dim)

    def forward(self, x: Tensor) -> Tensor:
        h = self.normalised(x)
        return (h * (1.0 + self.weight.to(h.dtype))).type_as(x)

    def gain(self) -> Tensor:
        return 1.0 + self.weight


class GemmaLayer(LLMLayer):
    """``x + norm(attn(norm(x)))`` then ``+ norm(mlp(norm(.)))``."""

    norm = GemmaRMSNorm
    scales_embeddings = True

    def __init__(self, cfg: ModelConfig, arch: LLMArch, layer: int):
        super().__init__(cfg, arch, layer)
        self.pre_feedforward_layernorm = self.norm(cfg.d_model, cfg.ln_eps)
        self.post_feedforward_layernorm = self.norm(cfg.d_model, cfg.ln_eps)

    def block(self) -> AttentionBlock:
        """The post-attention RMSNorm reads the block's output before the residual adds it."""
        plain, post = super().block(), self.post_attention_layernorm
        norm = BlockNorm(post.gain().detach(), None, post.eps, centred=False)
        return AttentionBlock(plain.out_weight, plain.out_bias, plain.heads, plain.kv_heads, norm, "block")

    def post_attention(self, out: Tensor) -> Tensor:
        return self.post_attention_layernorm(out)

    def feed_forward(self, x: Tensor) -> Tensor:
        return self.post_feedforward_layernorm(self.mlp(self.pre_feedforward_layernorm(x)))
