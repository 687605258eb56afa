"""PyNccl communicator: the eager-mode all-reduce path (extend / verify / no CUDA graph)."""

import os

import minitorch as torch

from minisglang.utils import logger


class PyNcclCommunicator:
    def __init__(self, world_size: int) -> None:
        self.world_size = world_size
        self.disabled = world_size == 1
        # NCCL reads its tuning knobs (NCCL_PROTO, NCCL_ALGO, ...) when the communicator is created.
        tuned = {k: v for k, v in os.environ.items() if k.startswith("NCCL_")}
        logger.info("PyNcclCommunicator: world_size=%d nccl_env=%s", world_size, tuned or "{}")

    def all_reduce(self, batch) -> None:
        if self.disabled:
            return
        torch.cuda.launch("allreduce_nccl", batch.work())
        # @site allreduce_eager
