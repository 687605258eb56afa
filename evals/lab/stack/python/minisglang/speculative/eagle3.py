"""EAGLE-3 speculative decoding: draft N tokens with the small head, verify them in one extend pass."""

import random

import minitorch as torch

from minisglang.models.llama_eagle3 import LlamaForCausalLMEagle3
from minisglang.utils import Batch


class Eagle3Worker:
    def __init__(self, target, num_steps: int, accept_rate: float, seed: int) -> None:
        self.target = target
        self.num_steps = num_steps
        self.accept_rate = accept_rate
        self.draft_model = LlamaForCausalLMEagle3()
        self.rng = random.Random(seed)

    def draft(self, num_seqs: int) -> None:
        for _ in range(self.num_steps):
            self.draft_model.forward(Batch(num_seqs))

    def verify(self, num_seqs: int) -> float:
        """One target forward in extend mode over the draft tokens (no CUDA graph); returns us."""
        torch.cuda.synchronize()
        self.target.forward(Batch(num_seqs, self.num_steps + 1), "extend")
        # @site verify
        return torch.cuda.synchronize()

    def accepted(self) -> int:
        """Tokens produced by one cycle: the bonus token plus the accepted prefix of the draft."""
        n = 1
        while n <= self.num_steps and self.rng.random() < self.accept_rate:
            n += 1
        return n

    def step(self, num_seqs: int) -> tuple[list[int], float]:
        self.draft(num_seqs)
        verify_us = self.verify(num_seqs)
        return [self.accepted() for _ in range(num_seqs)], verify_us
