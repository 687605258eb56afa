"""The CPU seconds ``import pyparsing`` takes, from the checkout in the working directory, in a
fresh interpreter, as the report measured it (what every ``pip`` start paid). A first interpreter
compiles the sources into ``__pycache__`` and is not counted, so the number is the import's own
work (building the grammar objects, compiling regexes), not the compiler's. A commit whose package
does not import exits non-zero: a hunt calls it unbuildable. CPU time, not wall time: the hunt's
other processes do not count, but the import's own noise (allocator, caches, frequency) does."""

import subprocess
import sys

CHILD = (
    "import sys, time; sys.path.insert(0, '.'); t = time.process_time(); import pyparsing; "
    "print(time.process_time() - t)"
)

for _warm in range(2):  # the first run writes the bytecode; the second is measured
    proc = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        sys.exit(proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "import failed")
print(round(float(proc.stdout.split()[-1]), 5))
