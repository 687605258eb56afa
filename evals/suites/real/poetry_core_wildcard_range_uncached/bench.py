"""poetry-core's own version constraints (pure Python, its dependencies vendored), from the
checkout in the working directory (``src`` layout): the CPU seconds of N/20 rounds of checking
200 versions against ten parsed constraints (ranges, unions, ``!=1.5.*``-style exclusions) and
intersecting, uniting and printing every pair of them, the operations Poetry's solver repeats
while locking (CPU time, not wall time: the hunt's other processes on the machine do not count).
The pypa/packaging compliance work (#402, 5116ed6) made ``VersionUnion.allows`` compute
``excludes_single_version()`` (a ``VersionRange().difference(self)``) on every call and
``VersionRange.__str__`` recompute its wildcard form, about 7x slower here; #582 caches them with
``cached_property``. Exits non-zero if the checkout's poetry-core is not the one imported."""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.getcwd(), "src"))
import poetry.core  # the probe's worktree, not an installed poetry-core

if not os.path.abspath(poetry.core.__file__).startswith(os.path.join(os.getcwd(), "src") + os.sep):
    sys.exit(f"imported {poetry.core.__file__}, not the checkout's")

from poetry.core.constraints.version import Version, parse_constraint

N = int(sys.argv[1]) if len(sys.argv) > 1 else 100
SPECS = [
    ">=1.2,<2.0",
    "^1.4",
    "~2.3.1",
    "!=1.5.*",
    ">=0.9,!=1.0.3,<3",
    "==1.2.*",
    "<1.0 || >=2.0,<2.5",
    ">=3.1.4",
    "!=2.0",
    "~=1.7",
]
constraints = [parse_constraint(s) for s in SPECS]
versions = [Version.parse(f"{a}.{b}.{c}") for a in range(4) for b in range(10) for c in range(5)]
t = time.process_time()
for _ in range(max(1, N // 20)):
    for c in constraints:
        for v in versions:
            c.allows(v)
    for a in constraints:
        for b in constraints:
            a.intersect(b)
            a.union(b)
            str(a)
print(f"{time.process_time() - t:.5f}")
