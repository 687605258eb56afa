"""attrs' own generated ``__init__``, from the checkout in the working directory (``src/``): the
CPU seconds of creating N instances of a frozen, slotted class with 40 attributes, made with
``attr.make_class`` (CPU time, not wall time: the hunt's other processes on the machine do not
count). A frozen class cannot assign its fields directly, so the generated ``__init__`` calls
``object.__setattr__`` once per field. Up to 21.4.0 it bound that once per instance
(``_setattr = _cached_setattr.__get__(self, self.__class__)``) and called the bound method;
PR #898 ("Speedup uses of `object.__setattr__`") calls ``_setattr(self, name, value)`` through a
global instead, cheaper for a 3-field class but dearer per field, so wide classes got slower
(about 1.3x at 40 fields); #991 restored the per-instance binding."""

import os
import sys
import time

sys.path.insert(0, "src")
import attr  # the probe's worktree, not an installed attrs

if not os.path.abspath(attr.__file__).startswith(os.getcwd() + os.sep):
    sys.exit(f"imported {attr.__file__}, not the checkout's")

N = int(sys.argv[1]) if len(sys.argv) > 1 else 80000
FIELDS = 40
C = attr.make_class("C", [f"a{i}" for i in range(FIELDS)], slots=True, frozen=True)
args = list(range(FIELDS))
C(*args)  # warm
t = time.process_time()
for _ in range(N):
    C(*args)
print(f"{time.process_time() - t:.5f}")
