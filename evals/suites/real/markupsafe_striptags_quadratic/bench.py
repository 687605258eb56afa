"""MarkupSafe's own ``Markup.striptags`` (pure Python), from the checkout in the working directory
(``src`` layout), on N short paragraphs of ordinary markup (``<p>Some <em>text</em> here</p>``,
four tags each); prints the CPU seconds the call took (CPU time, not wall time: the hunt's other
processes on the machine do not count). 2.1.4 replaced the two regexes with ``str.find`` loops
that rebuild the whole string (``value[:start] + value[end + 1:]``) for every tag removed:
quadratic in the number of tags. Exits non-zero if the checkout's markupsafe is not the one
imported (an interpreter may have MarkupSafe installed)."""

import os
import sys
import time

sys.path.insert(0, "src")
import markupsafe  # the probe's worktree, not an installed MarkupSafe

if not os.path.abspath(markupsafe.__file__).startswith(os.path.abspath("src") + os.sep):
    sys.exit(f"imported {markupsafe.__file__}, not the checkout's")

N = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
TEXT = markupsafe.Markup("<p>Some <em>text</em> here</p>\n" * N)
t = time.process_time()
TEXT.striptags()
print(f"{time.process_time() - t:.5f}")
