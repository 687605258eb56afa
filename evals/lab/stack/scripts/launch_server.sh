#!/usr/bin/env bash
# Launch the minisglang server from this checkout: scripts/launch_server.sh --port 30000 [flags...]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# Never write bytecode into the checkout: it must stay exactly as git left it.
export PYTHONDONTWRITEBYTECODE=1
export PYTHONPATH="$here/python${PYTHONPATH:+:$PYTHONPATH}"
exec "${PYTHON:-python3}" -u -m minisglang.launch_server "$@"
