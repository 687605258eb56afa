"""Custom all-reduce over P2P buffers: the fast path used inside captured CUDA graphs."""

import minitorch as torch


class CustomAllreduce:
    def __init__(self, world_size: int, max_size: int = 8 * 1024 * 1024) -> None:
        self.world_size = world_size
        self.max_size = max_size
        self.disabled = world_size == 1
        self.registered = False

    def should_custom_ar(self, batch) -> bool:
        return not self.disabled and batch.num_tokens * 7168 * 2 <= self.max_size

    def all_reduce(self, batch) -> None:
        torch.cuda.launch("allreduce_custom", batch.work())
        # @site allreduce_graph
