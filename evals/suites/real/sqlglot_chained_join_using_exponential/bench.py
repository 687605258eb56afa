"""sqlglot's own ``parse_one`` (pure Python), from the checkout in the working directory
(``sqlglot/`` at the root), on the query of the fix's own test: ``SELECT * FROM a`` followed by
N ``LEFT JOIN b ON a.id = b.id`` clauses. Prints the CPU seconds of R parses (CPU time, not wall
time: the hunt's other processes on the machine do not count). 105cbb6 (#1883, chained joins with
consecutive USING clauses) made ``_parse_join`` try, after every ``ON`` condition, to parse the
following joins as nested ones and then retreat, so each join re-parses all the joins after it:
the work doubles with every join (about 50x at N=10). 84033b0 parses the nested joins only when
no ``ON``/``USING`` follows. Exits non-zero if the checkout's sqlglot is not the one imported."""

import logging
import os
import sys
import time

# sqlglot logs an error when its generated ``_version.py`` is missing (a bare checkout): keep it quiet
logging.getLogger("sqlglot").addHandler(logging.NullHandler())
sys.path.insert(0, os.getcwd())
import sqlglot  # noqa: E402  (the probe's worktree, not an installed sqlglot)

if not os.path.abspath(sqlglot.__file__).startswith(os.getcwd() + os.sep):
    sys.exit(f"imported {sqlglot.__file__}, not the checkout's")

N = int(sys.argv[1]) if len(sys.argv) > 1 else 10
R = int(sys.argv[2]) if len(sys.argv) > 2 else 10
QUERY = "SELECT * FROM a\n" + "".join("LEFT JOIN b ON a.id = b.id\n" for _ in range(N))
t = time.process_time()
for _ in range(R):
    sqlglot.parse_one(QUERY)
print(f"{time.process_time() - t:.5f}")
