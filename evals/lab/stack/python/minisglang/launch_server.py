"""Entry point: ``python -m minisglang.launch_server --model-path ... --port ...``."""

import sys

from minisglang.entrypoints.http_server import launch_server
from minisglang.server_args import prepare_server_args

if __name__ == "__main__":
    launch_server(prepare_server_args(sys.argv[1:]))
