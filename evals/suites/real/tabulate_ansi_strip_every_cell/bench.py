"""tabulate's own ``tabulate()``, from the checkout in the working directory (``tabulate.py`` at
the root): the CPU seconds of formatting N times the 10x10 table of mixed text and integers that
the project's ``benchmark.py`` uses (CPU time, not wall time: the hunt's other processes on the
machine do not count). The table holds no ANSI colour codes. 0.5 taught tabulate to ignore ANSI
colour sequences when measuring widths (a7673f4, "fix #5"): every cell's width, padding and type
guess then ran a regular expression substitution, about 1.5x slower; bb6a5c4 added one more per
cell when guessing types (about +10 %). b07ab46 ("optimize when ANSI color sequences are not
found", 0.5.1) searches the whole table for a control code once and skips the stripping when there
is none. tabulate has no third-party imports."""

import os
import sys
import time

sys.path.insert(0, os.getcwd())
import tabulate  # the probe's worktree, not an installed tabulate

if not os.path.abspath(tabulate.__file__).startswith(os.getcwd() + os.sep):
    sys.exit(f"imported {tabulate.__file__}, not the checkout's")

N = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
table = [["some text", *range(i, i + 9)] for i in range(10)]
tabulate.tabulate(table)  # warm
t = time.process_time()
for _ in range(N):
    tabulate.tabulate(table)
print(f"{time.process_time() - t:.5f}")
