"""CPU seconds the peglint built in ./build (the case's setup) takes to parse a 200 KB
token stream with a grammar whose keyword rule is a dictionary ('if' | 'else' | ...), the
construct the regression hit. Grammar and input live beside this script (the input is
generated, seeded), so only the parser changes. A commit that did not build has no binary:
non-zero exit; a parse failure is a non-zero exit too."""

import os
import random
import resource
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
N = int(sys.argv[1]) if len(sys.argv) > 1 else 30000

rng = random.Random(1)
kw = ["if", "else", "while", "for", "return", "function", "var", "let", "const", "class"]
out = []
for i in range(N):
    r = rng.random()
    out.append(rng.choice(kw) if r < 0.5 else (str(rng.randint(0, 999)) if r < 0.7 else f"name{i}"))
    if i % 10 == 9:
        out.append(";\n")

with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
    f.write(" ".join(out))
try:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(
        ["build/peglint", os.path.join(HERE, "grammar.peg"), f.name], stdout=subprocess.DEVNULL, check=True, timeout=300
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
finally:
    os.unlink(f.name)
print(round(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, 5))
