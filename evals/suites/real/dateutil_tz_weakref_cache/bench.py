"""dateutil's own time zones, from the checkout in the working directory: the CPU seconds of N
rounds of building ``tz.tzstr("EST5EDT,M3.2.0,M11.1.0")`` without keeping it (the report's "calls
without storing values"), attaching it to a datetime and asking that datetime's UTC offset M times
(CPU time, not wall time: the hunt's other processes on the machine do not count). ``tzstr`` (like
``tzoffset`` and ``gettz``) returns a cached instance for identical arguments; PR #672 turned that
cache into a ``WeakValueDictionary``, so once the caller drops its reference the entry is gone and
the next call parses the string again. 2.8.0 (#761) adds a small strong LRU cache in front.

dateutil imports ``six`` at module level. Where the interpreter lacks it, a stand-in is put in its
place with the Python 3 meaning of the names dateutil uses (``PY2``/``PY3``, the type aliases,
``raise_from``, ``add_metaclass``, ``advance_iterator``, ``moves._thread``, ``moves.range``): six
itself is only those aliases on Python 3, so the timed code is unchanged."""

import datetime
import os
import sys
import time
import types

try:
    import six  # dateutil's dependency, when installed
except ImportError:
    import _thread

    six = types.ModuleType("six")
    six.PY2, six.PY3 = False, True
    six.binary_type, six.text_type = bytes, str
    six.string_types, six.integer_types = (str,), (int,)
    six.advance_iterator = next

    def raise_from(value, from_value):
        raise value from from_value

    def add_metaclass(metaclass):
        def wrapper(cls):
            namespace = cls.__dict__.copy()
            slots = namespace.get("__slots__")
            if slots is not None:
                for name in [slots] if isinstance(slots, str) else slots:
                    namespace.pop(name)
            namespace.pop("__dict__", None)
            namespace.pop("__weakref__", None)
            return metaclass(cls.__name__, cls.__bases__, namespace)

        return wrapper

    six.raise_from, six.add_metaclass = raise_from, add_metaclass
    moves = types.ModuleType("six.moves")
    moves._thread, moves.range = _thread, range
    six.moves = moves
    sys.modules["six"], sys.modules["six.moves"] = six, moves

sys.path.insert(0, ".")
from dateutil import tz  # the probe's worktree, not an installed dateutil

if not os.path.abspath(tz.__file__).startswith(os.getcwd() + os.sep):
    sys.exit(f"imported {tz.__file__}, not the checkout's")

N = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
M = int(sys.argv[2]) if len(sys.argv) > 2 else 10
moment = datetime.datetime(2018, 7, 1, 12, 0)
t = time.process_time()
for _ in range(N):
    zone = tz.tzstr("EST5EDT,M3.2.0,M11.1.0")
    aware = moment.replace(tzinfo=zone)
    for _ in range(M):
        aware.utcoffset()
    del zone, aware
print(f"{time.process_time() - t:.5f}")
