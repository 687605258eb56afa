"""NetworkX's own graph classes, from the checkout in the working directory: the CPU seconds of
creating N empty ``DiGraph`` objects (CPU time, not wall time: the hunt's other processes on the
machine do not count). Graph creation is the hot path of every copy, subgraph and conversion.
PR #5614 turned ``G.adj``/``G.succ``/``G.pred`` into ``functools.cached_property`` and cleared them
in ``__init__`` with ``if hasattr(self, "adj"): delattr(self, "adj")``; ``hasattr`` on a
cached_property evaluates it, so every new graph built and threw away three adjacency views:
about 4.5x slower for an empty DiGraph."""

import sys
import time

sys.path.insert(0, ".")
import networkx as nx  # the probe's worktree, not an installed NetworkX

N = int(sys.argv[1]) if len(sys.argv) > 1 else 50000
t = time.process_time()
for _ in range(N):
    nx.DiGraph()
print(f"{time.process_time() - t:.5f}")
