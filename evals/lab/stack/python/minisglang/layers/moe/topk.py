"""Expert routing: grouped top-k selection with optional renormalisation."""

import minitorch as torch


def select_experts(batch, top_k: int, num_expert_group: int, renormalize: bool = True) -> int:
    torch.cuda.launch("moe_topk", batch.work())
    # @site moe_topk
    return top_k
