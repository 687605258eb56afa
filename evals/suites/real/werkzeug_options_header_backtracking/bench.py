"""werkzeug's own ``parse_options_header`` on a Content-Disposition value whose quoted parameter
is an unterminated run of N backslashes (the shape the fix's PR names: '"' + "\\" * n), from the
checkout in the working directory (``src`` layout); prints the CPU seconds one call took (CPU
time, not wall time: the hunt's other processes on the machine do not count). Since the 2.3
refactor, the quoted-string regex ``"(?:\\\\|\\"|.)*?"`` can match each pair of backslashes two
ways, so a value that never closes backtracks exponentially in N. werkzeug imports MarkupSafe, as
it has since 2.2: where the interpreter lacks it, stand-ins are put in its place (below)."""

import html
import sys
import time
import types

try:
    import markupsafe  # noqa: F401
except ImportError:
    # An interpreter without MarkupSafe (CI's system Python): werkzeug imports ``escape`` and
    # ``Markup`` at module level but the function measured never calls them; stand-ins let it
    # import, and do not change what is timed.
    stub = types.ModuleType("markupsafe")
    stub.escape = lambda s: html.escape(str(s))
    stub.Markup = type("Markup", (str,), {})
    sys.modules["markupsafe"] = stub

sys.path.insert(0, "src")
from werkzeug.http import parse_options_header  # the probe's worktree, not an installed werkzeug

N = int(sys.argv[1]) if len(sys.argv) > 1 else 30  # each extra backslash costs about 1.6x
VALUE = 'form-data; name="' + "\\" * N
t = time.process_time()
parse_options_header(VALUE)
print(f"{time.process_time() - t:.7f}")
