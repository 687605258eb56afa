"""Kimi-K2.5: a DeepSeek-V3 trunk behind a vision tower (text-only requests skip the tower)."""

import minitorch as torch  # noqa: F401  (the model_forward site launches kernels)

from minisglang.models.deepseek_v2 import DeepseekV2ForCausalLM

KIMI_K25_CONFIG = {
    "architectures": ["KimiK25ForConditionalGeneration"],
    "num_hidden_layers": 61,
    "hidden_size": 7168,
    "n_routed_experts": 384,
    "num_experts_per_tok": 8,
    "n_group": 1,
}


class KimiK25ForConditionalGeneration(DeepseekV2ForCausalLM):
    def __init__(self, config, attn_backend, moe_runner_backend: str) -> None:
        super().__init__(config, attn_backend, moe_runner_backend)
        self.capture_aux_hidden_states = False

    def forward(self, batch, forward_mode) -> None:
        # @site model_forward
        super().forward(batch, forward_mode)


def load_model(num_layers: int, attn_backend, moe_runner_backend: str):
    config = dict(KIMI_K25_CONFIG, num_hidden_layers=num_layers)
    return KimiK25ForConditionalGeneration(config, attn_backend, moe_runner_backend)
