"""DeepSeek-V2/V3 architecture: MLA attention + routed MoE, the trunk of Kimi-K2.5."""

import minitorch as torch

from minisglang.distributed.parallel_state import tensor_model_parallel_all_reduce
from minisglang.layers.moe.topk import select_experts


class DeepseekV2MoE:
    def __init__(self, config, moe_runner_backend: str) -> None:
        self.top_k = config["num_experts_per_tok"]
        self.n_group = config["n_group"]
        self.kernel = "moe_experts_cutlass" if moe_runner_backend == "cutlass" else "moe_experts"

    def forward(self, batch, forward_mode) -> None:
        select_experts(batch, self.top_k, self.n_group)
        torch.cuda.launch(self.kernel, batch.work())
        # @site moe_experts
        tensor_model_parallel_all_reduce(batch)


class DeepseekV2AttentionMLA:
    def __init__(self, attn_backend) -> None:
        self.attn_backend = attn_backend

    def forward(self, batch, forward_mode) -> None:
        if forward_mode == "decode":
            self.attn_backend.forward_decode(batch)
        else:
            self.attn_backend.forward_extend(batch)
        tensor_model_parallel_all_reduce(batch)


class DeepseekV2DecoderLayer:
    def __init__(self, layer_id: int, config, attn_backend, moe_runner_backend: str) -> None:
        self.layer_id = layer_id
        self.self_attn = DeepseekV2AttentionMLA(attn_backend)
        self.mlp = DeepseekV2MoE(config, moe_runner_backend)

    def forward(self, batch, forward_mode) -> None:
        self.self_attn.forward(batch, forward_mode)
        self.mlp.forward(batch, forward_mode)
        # @site layer


class DeepseekV2ForCausalLM:
    def __init__(self, config, attn_backend, moe_runner_backend: str) -> None:
        self.config = config
        self.layers = [
            DeepseekV2DecoderLayer(i, config, attn_backend, moe_runner_backend)
            for i in range(config["num_hidden_layers"])
        ]

    def forward(self, batch, forward_mode) -> None:
        for layer in self.layers:
            layer.forward(batch, forward_mode)
        torch.cuda.launch("lm_head", batch.work())
