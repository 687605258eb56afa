"""Python-Markdown's own API on a document with one large raw-HTML block (a table of N rows, one
per line), from the checkout in the working directory; prints the CPU seconds the conversion took
(CPU time, not wall time: the hunt's other processes on the machine do not count). Since the HTML
parser rewrite every tag asks ``HTMLExtractor.line_offset`` where its line starts, and that property
re-scanned the document from the top with a regex each time: quadratic in the block's lines."""

import sys
import time

sys.path.insert(0, ".")
import markdown  # the probe's worktree, not an installed Markdown

N = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
ROWS = "".join(f"<tr><td>cell {i}</td><td>value {i * 7}</td></tr>\n" for i in range(N))
SOURCE = "# Title\n\nSome *text* here.\n\n<table>\n" + ROWS + "</table>\n\nMore **text** after.\n"
t = time.process_time()
markdown.markdown(SOURCE)
print(round(time.process_time() - t, 5))
