"""The EAGLE-3 draft head: one Llama decoder layer over the target's auxiliary hidden states."""

import minitorch as torch


class LlamaForCausalLMEagle3:
    def __init__(self, hidden_size: int = 7168) -> None:
        self.hidden_size = hidden_size

    def forward(self, batch) -> None:
        with torch.cuda.graph_replay():
            torch.cuda.launch("draft_step", batch.work())
            # @site draft
