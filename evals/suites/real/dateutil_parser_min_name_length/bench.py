"""dateutil's own parser, from the checkout in the working directory: the CPU seconds of N
``parser.parse("Thu Sep 25 10:36:28 BRST 2003")`` calls (the docs' example string), after one warm
call (CPU time, not wall time: the hunt's other processes on the machine do not count). Each
alphabetic token is offered to ``parserinfo.weekday()`` and ``parserinfo.month()``; PR #382 made
both compute ``min(len(n) for n in self._weekdays.keys())`` (and the months') on every call
instead of comparing with 3, a generator over the name table per token. PR #589 (2.7.0) removed
the ``min()`` calls.

dateutil 2.6 is 2017 code; two things let it import on a current Python without changing what is
timed: ``collections.Callable`` and friends point at ``collections.abc`` (removed from
``collections`` in 3.10), and where the interpreter lacks ``six`` (imported at module level) a
stand-in is put in its place with the Python 3 meaning of the names dateutil uses (``PY2``/``PY3``,
the type aliases, ``advance_iterator``, ``moves._thread``, ``moves.range``): six itself is only
those aliases on Python 3."""

import collections
import collections.abc
import os
import sys
import time
import types

for name in ("Callable", "Mapping", "Sequence", "Iterable"):
    if not hasattr(collections, name):
        setattr(collections, name, getattr(collections.abc, name))
try:
    import six  # dateutil's dependency, when installed
except ImportError:
    import _thread

    six = types.ModuleType("six")
    six.PY2, six.PY3 = False, True
    six.binary_type, six.text_type = bytes, str
    six.string_types, six.integer_types = (str,), (int,)
    six.advance_iterator = next
    moves = types.ModuleType("six.moves")
    moves._thread, moves.range = _thread, range
    six.moves = moves
    sys.modules["six"], sys.modules["six.moves"] = six, moves

sys.path.insert(0, ".")
from dateutil import parser  # noqa: E402  (the probe's worktree, not an installed dateutil)

if not os.path.abspath(parser.__file__).startswith(os.getcwd() + os.sep):
    sys.exit(f"imported {parser.__file__}, not the checkout's")

N = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
text = "Thu Sep 25 10:36:28 BRST 2003"
parser.parse(text)  # warm
t = time.process_time()
for _ in range(N):
    parser.parse(text)
print(f"{time.process_time() - t:.5f}")
