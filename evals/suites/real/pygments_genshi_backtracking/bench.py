"""Pygments' own Genshi lexer over a small XML build file whose comment holds an unclosed tag (the
report's reproduction, with 12 elements); from the checkout in the working directory. Prints the
CPU seconds the lexing took (CPU time, not wall time: the hunt's other processes do not count)."""

import sys
import time

sys.path.insert(0, ".")
from pygments.lexers import get_lexer_by_name  # the probe's worktree, not an installed Pygments

N = int(sys.argv[1]) if len(sys.argv) > 1 else 12
HEAD = '<?xml version="1.0"?>\n\n<project>\n  <!-- <move -->\n\n  <target>\n'
DOC = HEAD + "    <x />\n" * N + "  </target>\n</project>\n"
lexer = get_lexer_by_name("genshi")
t = time.process_time()
for _token in lexer.get_tokens(DOC):
    pass
print(round(time.process_time() - t, 5))
