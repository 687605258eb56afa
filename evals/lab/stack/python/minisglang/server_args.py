"""The server's arguments: parsed once at launch, logged in full, read everywhere."""

import argparse
import dataclasses
import os

from minisglang.utils import is_sm100_supported


@dataclasses.dataclass
class ServerArgs:
    model_path: str = "moonshotai/Kimi-K2.5"
    served_model_name: str | None = None
    host: str = "127.0.0.1"
    port: int = 30000
    tp_size: int = 8
    attention_backend: str = "triton"
    moe_runner_backend: str = "auto"
    disable_cuda_graph: bool = False
    cuda_graph_max_bs: int = 32
    max_running_requests: int = 48
    speculative_algorithm: str | None = None
    speculative_draft_model_path: str | None = None
    speculative_num_steps: int = 0
    speculative_eagle_topk: int = 1
    speculative_num_draft_tokens: int = 0
    decode_log_interval: int = 40
    random_seed: int = 42
    mem_fraction_static: float = 0.85
    watchdog_timeout: float = 300.0
    log_level: str = "info"

    def __post_init__(self) -> None:
        if self.served_model_name is None:
            self.served_model_name = self.model_path
        if os.environ.get("MINISGLANG_DISABLE_CUDA_GRAPH", "0").lower() in ("1", "true"):
            self.disable_cuda_graph = True
        if self.attention_backend not in ("triton", "flashinfer"):
            raise ValueError(f"unknown attention backend: {self.attention_backend}")
        if self.speculative_algorithm is not None:
            if self.speculative_algorithm != "EAGLE3":
                raise ValueError(f"unsupported speculative algorithm: {self.speculative_algorithm}")
            self.speculative_num_steps = self.speculative_num_steps or 2
            self.speculative_num_draft_tokens = self.speculative_num_steps + 1
        self._handle_moe_runner()

    def _handle_moe_runner(self) -> None:
        # Blockwise FP8 MoE: CUTLASS grouped GEMM where the arch has tuned kernels, else Triton.
        if self.moe_runner_backend == "auto":
            if is_sm100_supported():
                self.moe_runner_backend = "cutlass"
            else:
                self.moe_runner_backend = "triton"

    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser) -> None:
        for field in dataclasses.fields(ServerArgs):
            flag = "--" + field.name.replace("_", "-")
            if field.type is bool or field.type == "bool":
                parser.add_argument(flag, action="store_true")
            elif field.name in (
                "speculative_num_steps",
                "speculative_eagle_topk",
                "port",
                "tp_size",
                "cuda_graph_max_bs",
                "max_running_requests",
                "speculative_num_draft_tokens",
                "decode_log_interval",
                "random_seed",
            ):
                parser.add_argument(flag, type=int, default=field.default)
            elif field.name in ("mem_fraction_static", "watchdog_timeout"):
                parser.add_argument(flag, type=float, default=field.default)
            else:
                parser.add_argument(flag, type=str, default=field.default)
        parser.add_argument("--tensor-parallel-size", "--tp", dest="tp_size", type=int)

    @classmethod
    def from_cli_args(cls, args: argparse.Namespace) -> "ServerArgs":
        names = [f.name for f in dataclasses.fields(cls)]
        return cls(**{n: getattr(args, n) for n in names if getattr(args, n, None) is not None})


def prepare_server_args(argv: list[str]) -> ServerArgs:
    parser = argparse.ArgumentParser(prog="minisglang.launch_server")
    ServerArgs.add_cli_args(parser)
    return ServerArgs.from_cli_args(parser.parse_args(argv))
