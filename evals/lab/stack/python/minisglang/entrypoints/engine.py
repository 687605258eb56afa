"""The engine: loads the model onto the device, captures graphs, starts the scheduler."""

import json
import os
from pathlib import Path

import minitorch as torch

from minisglang.compilation.compile import CudaGraphRunner
from minisglang.distributed.parallel_state import initialize_model_parallel
from minisglang.layers.attention import create_attn_backend
from minisglang.managers.scheduler import Scheduler
from minisglang.managers.tokenizer_manager import TokenizerManager
from minisglang.models.kimi_k25 import load_model
from minisglang.speculative.eagle3 import Eagle3Worker
from minisglang.utils import logger


def _model_config(path: str) -> dict:
    root = Path(path)
    if not root.is_absolute():
        root = Path(os.environ.get("MINISGLANG_MODELS", ".")) / path
    config = root / "config.json"
    if not config.is_file():
        raise FileNotFoundError(f"model config not found: {config}")
    return json.loads(config.read_text())


class ModelRunner:
    def __init__(self, server_args) -> None:
        self.server_args = server_args
        config = _model_config(server_args.model_path)
        gpus = torch.cuda.reserve(server_args.tp_size, server_args.mem_fraction_static)
        logger.info("Init torch distributed begin. tp_size=%d, gpus=%s", server_args.tp_size, gpus)
        initialize_model_parallel(server_args.tp_size)
        self.attn_backend = create_attn_backend(server_args.attention_backend)
        logger.info("Load weight begin. avail mem=%.2f GB", 95.6)
        took = torch.simulated_wait(torch.LAUNCH_COSTS.get("weights_s", 0.0))
        self.model = load_model(config["num_hidden_layers"], self.attn_backend, server_args.moe_runner_backend)
        logger.info(
            "Load weight end. Time elapsed: %.2f s. type=%s, layers=%d, tp=%d, device=%s (sm%d%d)",
            took,
            type(self.model).__name__,
            len(self.model.layers),
            server_args.tp_size,
            torch.cuda.get_device_name(),
            *torch.cuda.get_device_capability(),
        )
        self.graph_runner = CudaGraphRunner(self.model, server_args.cuda_graph_max_bs, server_args.disable_cuda_graph)
        if server_args.disable_cuda_graph:
            logger.info("CUDA graph is disabled.")
        else:
            logger.info("Capture cuda graph begin. This can take up to several minutes.")
            took = torch.simulated_wait(torch.LAUNCH_COSTS.get("capture_s", 0.0))
            logger.info("Capture cuda graph end. Time elapsed: %.2f s. bs=%s", took, self.graph_runner.captured_bs)

    def forward_decode(self, batch) -> None:
        if self.graph_runner.can_run(batch):
            self.graph_runner.replay(batch, "decode")
        else:
            self.model.forward(batch, "decode")

    def forward_extend(self, batch) -> None:
        self.model.forward(batch, "extend")


class Engine:
    def __init__(self, server_args) -> None:
        self.server_args = server_args
        logger.info("server_args=%r", server_args)
        logger.info(
            "minitorch %s, attention_backend=%s, moe_runner_backend=%s",
            torch.__version__,
            server_args.attention_backend,
            server_args.moe_runner_backend,
        )
        self.tokenizer_manager = TokenizerManager(server_args.served_model_name)
        self.model_runner = ModelRunner(server_args)
        spec_worker = None
        if server_args.speculative_algorithm == "EAGLE3":
            draft = _model_config(server_args.speculative_draft_model_path or server_args.model_path + "-eagle3")
            spec_worker = Eagle3Worker(
                self.model_runner.model,
                server_args.speculative_num_steps,
                draft["accept_rate"],
                server_args.random_seed,
            )
            logger.info(
                "EAGLE3 draft model loaded: num_steps=%d, num_draft_tokens=%d",
                server_args.speculative_num_steps,
                server_args.speculative_num_draft_tokens,
            )
        self.scheduler = Scheduler(server_args, self.model_runner, spec_worker)
        self.scheduler.start()
