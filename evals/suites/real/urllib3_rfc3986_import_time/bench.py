"""The CPU seconds ``import urllib3`` takes, from the checkout in the working directory (``src``
layout), in a fresh interpreter, as the report measured it (an application's start-up paid it). A
first interpreter compiles the sources into ``__pycache__`` and is not counted (the child's
environment drops ``PYTHONDONTWRITEBYTECODE``), so the number is the import's own work (compiling
the vendored rfc3986's regexes, building classes), not the compiler's. A commit whose package does
not import, or whose ``urllib3`` is not the checkout's, exits non-zero: a hunt calls it
unbuildable. CPU time, not wall time: the hunt's other processes do not count. The optional
``brotli`` and ``pyOpenSSL`` imports are guarded; a plain ``python3`` lacks them."""

import os
import subprocess
import sys

CHILD = (
    "import os, sys, time; sys.path.insert(0, 'src'); t = time.process_time(); import urllib3; "
    "d = time.process_time() - t; "
    "sys.exit('imported ' + urllib3.__file__ + ', not the checkout') "
    "if not os.path.abspath(urllib3.__file__).startswith(os.path.abspath('src') + os.sep) else print(d)"
)

# bytecode is written even where the caller's environment forbids it
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

for _warm in range(2):  # the first run writes the bytecode; the second is measured
    # stderr passes through: a commit that does not import says why
    proc = subprocess.run([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, text=True, timeout=120, env=ENV)
    if proc.returncode != 0:
        sys.exit("import urllib3 failed")
print(round(float(proc.stdout.split()[-1]), 5))
