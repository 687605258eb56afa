"""CPU seconds the cmark binary built in ./build (the case's setup) takes to render the CommonMark
spec of the known-good commit, repeated 20 times (4 MB): the same input at every commit, read
from git, so only the parser changes. A commit that did not build has no binary: non-zero exit."""

import resource
import subprocess
import sys

GOOD = "4d2f310fe6d27edcee81e54b59f3b381c2a7c43a"  # tag 0.27.1
N = int(sys.argv[1]) if len(sys.argv) > 1 else 20

git = ["git", "show", f"{GOOD}:test/spec.txt"]
spec = subprocess.run(git, capture_output=True, text=True, check=True, timeout=60).stdout
before = resource.getrusage(resource.RUSAGE_CHILDREN)
doc = (spec + "\n") * N
subprocess.run(["build/src/cmark"], input=doc, text=True, stdout=subprocess.DEVNULL, check=True, timeout=300)
after = resource.getrusage(resource.RUSAGE_CHILDREN)
print(round(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, 5))
