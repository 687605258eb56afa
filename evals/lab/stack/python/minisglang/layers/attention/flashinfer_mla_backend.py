"""FlashInfer MLA attention backend: absorbed-MLA decode and ragged extend."""

import minitorch as torch


class FlashInferMLAAttnBackend:
    name = "flashinfer"

    def __init__(self, kv_cache_dtype: str = "fp8_e4m3") -> None:
        self.kv_cache_dtype = kv_cache_dtype
        self.workspace_mb = 128

    def forward_decode(self, batch) -> None:
        torch.cuda.launch("attention_decode_flashinfer", batch.work())
        # @site flashinfer_decode

    def forward_extend(self, batch) -> None:
        torch.cuda.launch("attention_extend_flashinfer", batch.work())
        # @site flashinfer_extend
