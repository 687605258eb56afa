"""MarkupSafe's own ``Markup.striptags`` (pure Python: the checkout's C speedups are not built, so
escaping falls back to ``_native``), from the checkout in the working directory (``src`` layout),
on N lines that each open a tag and never close it (``<a href='x'`` and a newline); prints the
CPU seconds the call took (CPU time, not wall time: the hunt's other processes on the machine do
not count). Since 2.1.2 the tag and comment regexes use ``re.DOTALL`` so that tags spanning lines
are stripped; ``<.*?>`` then scans from every ``<`` to the end of the text instead of to the end
of its line: quadratic in N. Exits non-zero if the checkout's markupsafe is not the one imported."""

import os
import sys
import time

sys.path.insert(0, "src")
import markupsafe  # the probe's worktree, not an installed MarkupSafe

if not os.path.abspath(markupsafe.__file__).startswith(os.path.abspath("src") + os.sep):
    sys.exit(f"imported {markupsafe.__file__}, not the checkout's")

N = int(sys.argv[1]) if len(sys.argv) > 1 else 4000
TEXT = markupsafe.Markup("<a href='x'\n" * N)
t = time.process_time()
TEXT.striptags()
print(f"{time.process_time() - t:.5f}")
