"""The CPU seconds ``import pyparsing`` takes, from the checkout in the working directory, in a
fresh interpreter, as the report measured it (what every ``pip`` start paid). A first interpreter
compiles the sources into ``__pycache__`` and is not counted, so the number is the import's own
work (building the grammar objects, compiling regexes), not the compiler's. A commit whose package
does not import exits non-zero: a hunt calls it unbuildable. CPU time, not wall time: the hunt's
other processes do not count, but the import's own noise (allocator, caches, frequency) does."""

import os
import subprocess
import sys

CHILD = (
    "import sys, time; sys.path.insert(0, '.'); t = time.process_time(); import pyparsing; "
    "print(time.process_time() - t)"
)

# Bytecode is written even where the caller's environment forbids it (``PYTHONDONTWRITEBYTECODE``,
# set on some machines): otherwise every run would compile the sources and time the compiler.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

for _warm in range(2):  # the first run writes the bytecode; the second is measured
    # stderr passes through: a hunt traces what the child imports there (PYTHONPROFILEIMPORTTIME),
    # and a commit that does not import says why
    proc = subprocess.run([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, text=True, timeout=120, env=ENV)
    if proc.returncode != 0:
        sys.exit("import pyparsing failed")
print(round(float(proc.stdout.split()[-1]), 5))
