"""tomlkit's own ``tomlkit.parse`` (pure Python), from the checkout in the working directory
(``tomlkit/`` at the root), on the document of the project's issue #479: N dotted keys sharing
the prefix ``a.b.c`` (``a.b.c.key0 = 0`` ...). Prints the CPU seconds the parse took (CPU time,
not wall time: the hunt's other processes on the machine do not count). Each dotted key is parsed
as its own fragment of the out-of-order table ``a``, and every fragment re-validates the ones
before it; 0.15.0's TOML 1.1 update (7f237d8) turned that validation's ``append(...,
validate=False)`` into ``validate=True``, so every re-validation also validates each key's
subtree again: 6-8x slower at N=30-40. Exits non-zero if the checkout's tomlkit is not the one
imported (an interpreter may have tomlkit installed, e.g. with Poetry)."""

import os
import sys
import time

sys.path.insert(0, os.getcwd())
import tomlkit  # the probe's worktree, not an installed tomlkit

if not os.path.abspath(tomlkit.__file__).startswith(os.getcwd() + os.sep):
    sys.exit(f"imported {tomlkit.__file__}, not the checkout's")

N = int(sys.argv[1]) if len(sys.argv) > 1 else 30
DOC = "".join(f"a.b.c.key{i} = {i}\n" for i in range(N))
t = time.process_time()
tomlkit.parse(DOC)
print(f"{time.process_time() - t:.5f}")
