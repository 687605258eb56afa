"""How ``tiny-bpe/`` was made (kept for provenance, not run by the tests): a random-weight Llama of
hidden size 64, 2 layers and a 1000-row vocabulary (about 202k parameters, float16), with a byte-level
BPE tokenizer of 128,256 entries (Llama 3's vocabulary size) built here. Nothing comes from the
Hugging Face hub, and neither torch nor transformers is needed: the weights are written with mlx.

Why a large vocabulary: the regression lives in ``BPEStreamingDetokenizer.__init__``, which turns
the whole vocabulary into an id-to-token list; after the culprit it runs once per request instead of
once per model load. Its cost scales with the tokenizer's vocabulary, not the model's, so the model
keeps 1000 rows (ids 0-999: 3 specials, the 256 byte-level characters, 741 words " w<i>") and the
other 127,256 entries are fillers it never generates; the end-of-sequence token (the last id) is
outside the model's rows, so generation always runs to ``max_tokens``. ``ByteLevel`` as the decoder
is what makes mlx-lm pick its BPE streaming detokenizer. No merges: a prompt encodes byte by byte.

    python make_tiny_model.py OUTDIR     # with mlx, numpy and tokenizers
"""

import json
import os
import sys

import mlx.core as mx
import numpy as np
from tokenizers import Tokenizer, decoders, models, pre_tokenizers

VOCAB = 128256  # the tokenizer's
ROWS = 1000  # the model's
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def byte_alphabet() -> list[str]:
    """GPT-2's printable stand-ins for the 256 bytes (``bytes_to_unicode``), in byte order."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    table = dict(zip(bs, cs, strict=True))
    return [chr(table[b]) for b in range(256)]


def main(out: str) -> None:
    os.makedirs(out, exist_ok=True)
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tokens = specials + byte_alphabet()
    tokens += [f"\u0120w{i}" for i in range(ROWS - len(tokens))]  # "Ġw12" decodes to " w12"
    tokens += [f"z{i:x}" for i in range(VOCAB - 1 - len(tokens))]  # never generated
    tokens.append("<|never|>")
    assert len(tokens) == VOCAB and len(set(tokens)) == VOCAB
    tok = Tokenizer(models.BPE({t: i for i, t in enumerate(tokens)}, [], unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([*specials, "<|never|>"])
    tok.save(os.path.join(out, "tokenizer.json"), pretty=False)
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "bos_token": "<|endoftext|>",
                "eos_token": "<|never|>",
                "pad_token": "<|endoftext|>",
                "unk_token": "<|endoftext|>",
                "clean_up_tokenization_spaces": False,
                "model_max_length": 2048,
                "chat_template": CHAT_TEMPLATE,
            },
            f,
            indent=1,
        )
    hidden, inter, layers, heads, kv_heads = 64, 128, 2, 4, 2
    head_dim = hidden // heads
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": ROWS,
        "hidden_size": hidden, "intermediate_size": inter, "num_hidden_layers": layers,
        "num_attention_heads": heads, "num_key_value_heads": kv_heads, "head_dim": head_dim,
        "max_position_embeddings": 2048, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
        "hidden_act": "silu", "attention_bias": False, "mlp_bias": False, "tie_word_embeddings": False,
        "bos_token_id": 0, "eos_token_id": VOCAB - 1, "pad_token_id": 0, "torch_dtype": "float16",
        "transformers_version": "4.57.1",
    }  # fmt: skip
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    rng = np.random.default_rng(0)

    def w(*shape):
        return mx.array((rng.standard_normal(shape) * 0.02).astype(np.float16))

    weights = {"model.embed_tokens.weight": w(ROWS, hidden), "lm_head.weight": w(ROWS, hidden)}
    weights["model.norm.weight"] = mx.ones((hidden,), dtype=mx.float16)
    for i in range(layers):
        p = f"model.layers.{i}."
        weights[p + "self_attn.q_proj.weight"] = w(heads * head_dim, hidden)
        weights[p + "self_attn.k_proj.weight"] = w(kv_heads * head_dim, hidden)
        weights[p + "self_attn.v_proj.weight"] = w(kv_heads * head_dim, hidden)
        weights[p + "self_attn.o_proj.weight"] = w(hidden, heads * head_dim)
        weights[p + "mlp.gate_proj.weight"] = w(inter, hidden)
        weights[p + "mlp.up_proj.weight"] = w(inter, hidden)
        weights[p + "mlp.down_proj.weight"] = w(hidden, inter)
        weights[p + "input_layernorm.weight"] = mx.ones((hidden,), dtype=mx.float16)
        weights[p + "post_attention_layernorm.weight"] = mx.ones((hidden,), dtype=mx.float16)
    mx.save_safetensors(os.path.join(out, "model.safetensors"), weights, metadata={"format": "mlx"})


if __name__ == "__main__":
    main(sys.argv[1])
