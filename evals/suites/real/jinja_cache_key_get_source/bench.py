"""Jinja2's own rendering, from the checkout in the working directory: a template loaded through a
FileSystemLoader (auto_reload off, so cached) that includes another template 100 times in a loop,
rendered N times; prints the CPU seconds (CPU time, not wall time: the hunt's other processes on
the machine do not count). Since 2.8 ``Environment._load_template`` keys its cache on the path that
``loader.get_source()`` returns, so every ``{% include %}`` re-reads the included file from disk
before the cache is even consulted (the report: "extra IO being performed even with templates
being cached and auto reloading disabled").

Jinja 2.7/2.8 is 2015 code; three shims let it import on a current Python without changing what
is timed: ``re.compile`` hoists inline flags found mid-pattern to the front (what Python < 3.11
did with them: the lexer's rules are joined into one pattern), ``collections.Mapping`` and friends
point at ``collections.abc``, and ``markupsafe.soft_unicode`` at ``soft_str``. Jinja imports
MarkupSafe at module level; where the interpreter lacks it, stand-ins are put in its place: the
template renders with autoescaping off and no filters, so they are never called."""

import collections
import collections.abc
import html
import os
import re
import sys
import tempfile
import time
import types

_compile = re.compile
_INLINE_FLAGS = _compile(r"\(\?([aiLmsux]+)\)")


def _hoisting_compile(pattern, flags=0):
    if isinstance(pattern, str):
        found = _INLINE_FLAGS.findall(pattern)
        if len(found) > 1 or (found and not pattern.startswith(f"(?{found[0]})")):
            letters = "".join(sorted(set("".join(found))))
            pattern = f"(?{letters})" + _INLINE_FLAGS.sub("", pattern)
    return _compile(pattern, flags)


re.compile = _hoisting_compile
for name in ("Mapping", "MutableMapping", "Sequence", "MutableSequence", "Iterable", "Callable"):
    if not hasattr(collections, name):
        setattr(collections, name, getattr(collections.abc, name))
try:
    import markupsafe
except ImportError:
    markupsafe = types.ModuleType("markupsafe")
    markupsafe.Markup = type("Markup", (str,), {})
    markupsafe.escape = lambda s: markupsafe.Markup(html.escape(str(s)))
    markupsafe.soft_str = str
    sys.modules["markupsafe"] = markupsafe
if not hasattr(markupsafe, "soft_unicode"):
    markupsafe.soft_unicode = markupsafe.soft_str

sys.path.insert(0, ".")
import jinja2  # noqa: E402  (the probe's worktree, not an installed Jinja2)

if not os.path.abspath(jinja2.__file__).startswith(os.getcwd() + os.sep):
    sys.exit(f"imported {jinja2.__file__}, not the checkout's")

N = int(sys.argv[1]) if len(sys.argv) > 1 else 200
with tempfile.TemporaryDirectory() as folder:
    with open(os.path.join(folder, "page.txt"), "w") as f:
        f.write("{% for i in range(100) %}{% include 'part.txt' %}{% endfor %}")
    with open(os.path.join(folder, "part.txt"), "w") as f:
        f.write("this is part {{ i }}\n")
    env = jinja2.Environment(auto_reload=False, loader=jinja2.FileSystemLoader([folder]))
    template = env.get_template("page.txt")
    template.render()  # warm: compile both templates once
    t = time.process_time()
    for _ in range(N):
        template.render()
    print(f"{time.process_time() - t:.5f}")
