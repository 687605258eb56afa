"""Tokenizer manager: turns prompts into token counts and generated tokens into text."""

import hashlib
import random

_WORDS = (
    "the model routes each token through eight experts while the draft head proposes the next few "
    "tokens and the target verifies them in one pass over the paged cache of keys and values"
).split()


class TokenizerManager:
    def __init__(self, served_model_name: str) -> None:
        self.served_model_name = served_model_name

    def count_tokens(self, text: str) -> int:
        # About four characters a token, like a BPE vocabulary on English text.
        return max(1, (len(text) + 3) // 4)

    def detokenizer(self, prompt: str, seed: int):
        """A deterministic stream of token texts for one request."""
        digest = hashlib.sha256(f"{seed}:{prompt}".encode()).digest()
        rng = random.Random(int.from_bytes(digest[:8], "big"))
        while True:
            yield " " + rng.choice(_WORDS)
