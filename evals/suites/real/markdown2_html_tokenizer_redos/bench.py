"""python-markdown2's own converter, from the checkout in the working directory (``lib/``): the CPU
seconds of R conversions of the report's input shape (issue #633), ``'<p m="1"' * K`` followed by
spaces and an unclosed ``</div``, after one warm conversion (CPU time, not wall time: the hunt's
other processes on the machine do not count). The HTML tokenizer regex looks for tags with
attributes; PR #602 (an XSS fix) let attribute names be any run of ``[^<>"'=/]`` (spaces included)
inside ``(\\s+ name= value)*``, so a run of unterminated tags backtracks polynomially; 2.5.4 (#634)
bounds the quoted values. K is kept small so the cost is a moderate multiple, not a hang."""

import os
import sys
import time

sys.path.insert(0, "lib")
import markdown2  # the probe's worktree, not an installed markdown2

if not os.path.abspath(markdown2.__file__).startswith(os.getcwd() + os.sep):
    sys.exit(f"imported {markdown2.__file__}, not the checkout's")

K = int(sys.argv[1]) if len(sys.argv) > 1 else 30
R = int(sys.argv[2]) if len(sys.argv) > 2 else 150
text = '<p m="1"' * K + " " * (2 * K) + "</div"
markdown2.markdown(text)  # warm: compile the regexes once
t = time.process_time()
for _ in range(R):
    markdown2.markdown(text)
print(f"{time.process_time() - t:.5f}")
