"""astroid's own inference (pure Python), from the checkout in the working directory (``astroid/``
at the root), of N ``collections.namedtuple()`` calls, each inferred R times over (a linter's
checkers infer the same nodes again and again). Prints the CPU seconds of the R rounds (CPU time,
not wall time: the hunt's other processes on the machine do not count). ``namedtuple()`` is
inferred through an inference tip (the namedtuple brain builds the class from a source string),
whose results ``astroid/inference_tip.py`` caches per call node. Unbounded, the cache makes every
round after the first nearly free; #1565 (95bbd5e) bounded it to 128 entries, #1570 (33b6c56)
reverted that, and #2181 re-landed it with 64 entries (f34070a): with more calls than entries,
the LRU evicts each one before its turn comes again, so every round redoes the full inference
(about 4x at R=4). Exits non-zero if the checkout's astroid is not the one imported.

astroid before April 2023 imports ``wrapt`` and ``lazy_object_proxy``; ``vendor.zip`` beside this
file holds their unmodified pure-Python sources (wrapt 1.14.1, lazy-object-proxy 1.7.1, the
versions of the time; BSD licences in LICENSE-wrapt.txt and LICENSE-lazy-object-proxy.txt), put
on the path ahead of any installed copy so every commit runs the same code whatever the
interpreter has (a plain ``python3`` has neither)."""

import os
import sys
import time

sys.path.insert(0, os.getcwd())
sys.path.insert(1, os.path.join(os.path.dirname(os.path.abspath(__file__)), "vendor.zip"))
import astroid  # the probe's worktree, not an installed astroid)

if not os.path.abspath(astroid.__file__).startswith(os.getcwd() + os.sep):
    sys.exit(f"imported {astroid.__file__}, not the checkout's")

N = int(sys.argv[1]) if len(sys.argv) > 1 else 150
R = int(sys.argv[2]) if len(sys.argv) > 2 else 4
SOURCE = "import collections\n" + "".join(f"T{i} = collections.namedtuple('T{i}', 'a b c')\n" for i in range(N))
calls = [assign.value for assign in astroid.parse(SOURCE).body[1:]]
# Untimed: the first namedtuple() inferred makes astroid build the tree of collections itself.
next(astroid.extract_node("import collections\ncollections.namedtuple('W', 'a')").infer())
t = time.process_time()
for _ in range(R):
    for call in calls:
        next(call.infer())
print(f"{time.process_time() - t:.5f}")
