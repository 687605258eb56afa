#!/bin/sh
# mlx-lm's own OpenAI-compatible server (mlx_lm.server) from the probe's worktree, on the CPU, serving
# the tiny random-weight model beside this script. usage: serve.sh WORKTREE PORT
# The interpreter: $SLEUTH_CASE_PYTHON (one with mlx[cpu] 0.31.2 and transformers 4.57.6: SOURCE.md).
here=$(cd "$(dirname "$0")" && pwd)
cd "$1" || exit 2
HF_HUB_OFFLINE=1 PYTHONPATH="$1" exec "${SLEUTH_CASE_PYTHON:-python3}" -m mlx_lm.server \
    --model "$here/tiny-llama" --host 127.0.0.1 --port "$2"
