"""Pygments' own Lua lexer over the lines of the report (pygments#2909, as in #2839): a statement
ending in a name, then comment lines, all indented with spaces; from the checkout in the working
directory. Prints the CPU seconds the lexing took (CPU time, not wall time: the hunt's other
processes do not count). The cost doubles with each space of indentation at the bad commits."""

import sys
import time

sys.path.insert(0, ".")
from pygments.lexers import get_lexer_by_name  # the probe's worktree, not an installed Pygments

INDENT = " " * (int(sys.argv[1]) if len(sys.argv) > 1 else 6)
LINES = [
    "local shipRarity = ship.Rarity",
    "-- 'ship.Rarity' is the rarity of the ship whose",
    "-- nationality from Cargo matches the 'nationality' input",
    "-- to the function.",
]
CODE = "".join(INDENT + line + "\n" for line in LINES)
lexer = get_lexer_by_name("lua")
t = time.process_time()
for _token in lexer.get_tokens(CODE):
    pass
print(round(time.process_time() - t, 5))
