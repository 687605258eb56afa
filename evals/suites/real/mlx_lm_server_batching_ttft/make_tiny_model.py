"""How ``tiny-llama/`` was made (2026-12-04; kept for provenance, not run by the tests): a random-weight
Llama of hidden size 64, 2 layers, vocabulary 1000 (about 202k parameters, 810 KB), and a word-level
tokenizer built here with a ChatML-style chat template. Nothing comes from the Hugging Face hub.
Every generated token decodes to a whole word, so a streaming server sends one chunk per token, as a
real model's does; the end-of-sequence id (1000) is outside the model's vocabulary, so generation
always runs to ``max_tokens``. Needs torch, tokenizers and transformers.

    python make_tiny_model.py OUTDIR
"""

import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def main(out: str) -> None:
    torch.manual_seed(0)
    words = [
        "<|endoftext|>",
        "<|im_start|>",
        "<|im_end|>",
        "[UNK]",
        "user",
        "assistant",
        "system",
        "tell",
        "me",
        "a",
        "story",
        "about",
        "tiny",
        "model",
        "hello",
        "the",
        "quick",
        "brown",
        "fox",
        ".",
        ",",
        "?",
        "!",
    ]
    words += [f"w{i}" for i in range(1000 - len(words))]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.add_special_tokens(["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    vocab = tok.get_vocab_size()  # the model's; the end-of-sequence token below gets id ``vocab``
    tok.add_special_tokens(["<|never|>"])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<|endoftext|>", eos_token="<|never|>",
        pad_token="<|endoftext|>", unk_token="<|endoftext|>",
    )  # fmt: skip
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)
    cfg = LlamaConfig(
        vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=2048, bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id, pad_token_id=fast.pad_token_id, tie_word_embeddings=False,
    )  # fmt: skip
    LlamaForCausalLM(cfg).save_pretrained(out)
    path = os.path.join(out, "tokenizer_config.json")
    with open(path) as f:
        config = json.load(f)
    config["chat_template"] = CHAT_TEMPLATE  # older transformers read it only from here
    config["tokenizer_class"] = "PreTrainedTokenizerFast"  # v5 writes TokenizersBackend, unknown to 4.x
    with open(path, "w") as f:
        json.dump(config, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
