"""minisglang: a small LLM serving stack laid out like SGLang."""

__version__ = "0.5.3"
