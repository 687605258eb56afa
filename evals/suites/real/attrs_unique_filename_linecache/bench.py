"""attrs' own class creation, from the checkout in the working directory (``src/``): the CPU seconds
of defining, in one process, N classes with the same name (a four-field ``@attr.s`` class made
inside a function, as the report's harness does) and creating one instance of each (CPU time, not
wall time: the hunt's other processes on the machine do not count). Every generated method
(``__init__``, ``__repr__``, ``__eq__``, ...) gets a fake file name registered in ``linecache``.
From 19.2.0 that name no longer carries a random id: it is ``<attrs generated init
module.MyClass>``, and when it is taken the builder tries ``-2``, ``-3``, ... until one is free, so
the k-th class with a name walks k names per method and defining N classes costs O(N^2); 21.3.0
reuses the entry when the source is identical."""

import os
import sys
import time

sys.path.insert(0, "src")
import attr  # the probe's worktree, not an installed attrs

if not os.path.abspath(attr.__file__).startswith(os.getcwd() + os.sep):
    sys.exit(f"imported {attr.__file__}, not the checkout's")

N = int(sys.argv[1]) if len(sys.argv) > 1 else 150


def create():
    @attr.s
    class MyClass:
        access_token = attr.ib()
        expires = attr.ib()
        refresh_token = attr.ib()
        user = attr.ib()

    return MyClass(access_token="s", expires=0, refresh_token="s", user="s")


t = time.process_time()
for _ in range(N):
    create()
print(f"{time.process_time() - t:.5f}")
