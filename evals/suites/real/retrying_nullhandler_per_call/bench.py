"""retrying's own ``@retry`` decorator (one module, ``retrying.py`` at the root), from the
checkout in the working directory: the CPU seconds of N calls of a decorated function that
succeeds at once (CPU time, not wall time: the hunt's other processes on the machine do not
count). ``@retry`` builds a new ``Retrying`` for every call; 1.3.5's logging (#6, d8d9e2a) made
each ``Retrying.__init__`` add a fresh ``logging.NullHandler`` to the module's logger, so the
handler list grows by one per call and ``Logger.addHandler``'s ``hdlr in self.handlers`` scan
makes N calls quadratic (about 16x at N=8000). #21 adds the handler once. Exits non-zero if
the checkout's retrying is not the one imported."""

import os
import sys
import time

sys.path.insert(0, os.getcwd())
import retrying  # the probe's worktree, not an installed retrying

if not os.path.abspath(retrying.__file__).startswith(os.getcwd() + os.sep):
    sys.exit(f"imported {retrying.__file__}, not the checkout's")

N = int(sys.argv[1]) if len(sys.argv) > 1 else 8000


@retrying.retry(stop_max_attempt_number=3)
def succeed(x):
    return x


t = time.process_time()
for i in range(N):
    succeed(i)
print(f"{time.process_time() - t:.5f}")
