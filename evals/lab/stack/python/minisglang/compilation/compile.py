"""CUDA graph capture and replay for decode batches."""

from contextlib import contextmanager

import minitorch as torch

from minisglang.distributed.parallel_state import get_tp_group


class CudaGraphRunner:
    def __init__(self, model, max_bs: int, disabled: bool) -> None:
        self.model = model
        self.max_bs = max_bs
        self.disabled = disabled
        self.captured_bs = [] if disabled else [1, 2, 4, 8, 16, 32][: max(1, max_bs.bit_length())]

    def can_run(self, batch) -> bool:
        return not self.disabled and batch.tokens_per_seq == 1 and batch.num_seqs <= self.max_bs

    @contextmanager
    def _graph_mode(self):
        group = get_tp_group()
        group.in_graph_capture = True
        try:
            with torch.cuda.graph_replay():
                yield
        finally:
            group.in_graph_capture = False

    def replay(self, batch, forward_mode) -> None:
        # @site graph_replay
        with self._graph_mode():
            self.model.forward(batch, forward_mode)
