"""pyparsing's ``transform_string`` over a long text (20,000 words, each upper-cased by a parse
action), from the checkout in the working directory. Prints the CPU seconds the transform took
(CPU time, not wall time: the hunt's other processes do not count). ``transform_string`` ends by
flattening its output list, one item per match and per gap: a flatten that pops from the front of
a list is quadratic in the number of matches."""

import sys
import time

sys.path.insert(0, ".")
import pyparsing as pp  # the probe's worktree, not an installed pyparsing

N = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
TEXT = " ".join(f"word{i % 97}x" for i in range(N))
word = pp.Word(pp.alphanums).set_parse_action(lambda t: t[0].upper())
t = time.process_time()
word.transform_string(TEXT)
print(round(time.process_time() - t, 5))
