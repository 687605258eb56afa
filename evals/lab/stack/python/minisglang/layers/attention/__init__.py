"""Attention backends, chosen by ``--attention-backend``."""

from minisglang.layers.attention.flashinfer_mla_backend import FlashInferMLAAttnBackend
from minisglang.layers.attention.triton_backend import TritonAttnBackend


def create_attn_backend(name: str):
    if name == "flashinfer":
        return FlashInferMLAAttnBackend()
    return TritonAttnBackend()
