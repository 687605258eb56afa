"""Python-Markdown's own API on a short document whose middle paragraph is a run of N dashes, a
word and N more dashes (the shape of the report's input), from the checkout in the working
directory; prints the CPU seconds the conversion took (CPU time, not wall time: the hunt's other
processes on the machine do not count). The horizontal-rule regex ``((-+[ ]{0,2}){3,}|...)[ ]*$``
backtracks exponentially in N when the line is not a rule; before the '$' was added it matched
only the rule itself and checked the next character in Python."""

import sys
import time

sys.path.insert(0, ".")
import markdown  # the probe's worktree, not an installed Markdown

N = int(sys.argv[1]) if len(sys.argv) > 1 else 22  # each extra dash costs about 1.8x
SOURCE = "Intro paragraph.\n\n" + "-" * N + "hello" + "-" * N + "\n\nMore text.\n"
t = time.process_time()
markdown.markdown(SOURCE)
print(round(time.process_time() - t, 5))
