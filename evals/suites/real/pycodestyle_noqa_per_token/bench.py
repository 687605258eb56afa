"""pycodestyle's own checker, from the checkout in the working directory: the CPU seconds of R
``Checker.check_all()`` runs over ten very long lines (a list of W float literals each, like the
generated coefficient tables of the report) and blank lines between them (CPU time, not wall
time: the hunt's other processes on the machine do not count). PR #539 made the checker compute
``self.noqa = noqa(token[4])`` for every token, and ``token[4]`` is the whole physical line, so a
line of W tokens runs the ``# noqa`` regex W times over W tokens' worth of text (quadratic in line
length); before, ``maximum_line_length`` searched each line once. 2.4.0 puts an ``lru_cache`` on
``noqa`` (PR #644)."""

import os
import sys
import time

sys.path.insert(0, ".")
import pycodestyle  # the probe's worktree, not an installed pycodestyle

if not os.path.abspath(pycodestyle.__file__).startswith(os.getcwd() + os.sep):
    sys.exit(f"imported {pycodestyle.__file__}, not the checkout's")

W = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
R = int(sys.argv[2]) if len(sys.argv) > 2 else 2
lines = ["COEFFS = [" + ", ".join(f"{i}.5" for i in range(W)) + "]\n", "\n"] * 10
t = time.process_time()
for _ in range(R):
    checker = pycodestyle.Checker(lines=lines, quiet=True)
    checker.check_all()
print(f"{time.process_time() - t:.5f}")
