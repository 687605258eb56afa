"""lizard's own API on a fixed C++ source (30 templated functions: '<' and '>' everywhere), from
the checkout in the working directory; prints the CPU seconds the analysis took (CPU time, not
wall time: the hunt's other processes on the machine do not count)."""

import sys
import time

sys.path.insert(0, ".")
import lizard  # the probe's worktree, not an installed lizard

N = int(sys.argv[1]) if len(sys.argv) > 1 else 30
SOURCE = "".join(
    f"template <typename T{i}> int f{i}(std::vector<T{i}> v) {{ if (v.size() < {i} && {i} > 2) return {i}; "
    f"for (int k = 0; k < {i}; k++) {{ v[k] = k << 1; }} return 0; }}\n"
    for i in range(N)
)
t = time.process_time()
lizard.analyze_file.analyze_source_code("bench.cpp", SOURCE)
print(round(time.process_time() - t, 5))
