"""Device helpers shared across the stack."""

import logging

import minitorch as torch

logger = logging.getLogger("minisglang")


def get_device_sm() -> int:
    major, minor = torch.cuda.get_device_capability()
    return major * 10 + minor


def is_sm90_supported() -> bool:
    return get_device_sm() == 90


def is_sm100_supported() -> bool:
    return get_device_sm() // 10 == 10


def is_sm120_supported() -> bool:
    return get_device_sm() // 10 == 12


class Batch:
    """The tokens of one forward pass: ``num_seqs`` sequences, ``tokens_per_seq`` each."""

    def __init__(self, num_seqs: int, tokens_per_seq: int = 1) -> None:
        self.num_seqs = num_seqs
        self.tokens_per_seq = tokens_per_seq

    @property
    def num_tokens(self) -> int:
        return self.num_seqs * self.tokens_per_seq

    def work(self) -> float:
        """Relative kernel work against one decode token (batching is sub-linear)."""
        seqs = 1.0 + 0.1 * (self.num_seqs - 1)
        per_seq = 1.0 if self.tokens_per_seq <= 4 else 1.0 + (self.tokens_per_seq - 4) / 8.0
        return seqs * per_seq
