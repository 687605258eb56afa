"""Triton attention backend: paged KV decode and extend kernels."""

import minitorch as torch


class TritonAttnBackend:
    name = "triton"

    def __init__(self, num_kv_splits: int = 8) -> None:
        self.num_kv_splits = num_kv_splits

    def forward_decode(self, batch) -> None:
        torch.cuda.launch("attention_decode_triton", batch.work())
        # @site attention_decode

    def forward_extend(self, batch) -> None:
        torch.cuda.launch("attention_extend_triton", batch.work())
        # @site attention_extend
