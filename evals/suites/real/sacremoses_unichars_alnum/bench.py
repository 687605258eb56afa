"""sacremoses' own MosesTokenizer, from the checkout in the working directory: the CPU seconds of
importing it, building an English tokenizer and tokenizing one sentence (what the first call of a
fresh process costs; CPU time, not wall time: the hunt's other processes on the machine do not
count). In 0.0.22 the character classes behind the tokenizer's regexes (IsAlnum, IsAlpha, ...)
were regenerated with every CJK/Hangul character, so the first tokenize compiles enormous
character-class regexes: 15x slower. sacremoses.util imports joblib and tqdm at module level; the
tokenizer never calls them, so where the interpreter lacks them stand-ins are put in their place
(below), which does not change what is timed."""

import sys
import time
import types

for name, attrs in (("joblib", ("Parallel", "delayed")), ("tqdm", ("tqdm",))):
    try:
        __import__(name)
    except ImportError:
        stub = types.ModuleType(name)
        for attr in attrs:
            setattr(stub, attr, lambda *a, **k: None)
        sys.modules[name] = stub

sys.path.insert(0, ".")
t = time.process_time()
from sacremoses import MosesTokenizer  # noqa: E402  (timed: the import compiles the tables)

mt = MosesTokenizer(lang="en")
mt.tokenize("Hello, Mr. Smith! This isn't a test-case, it's 3.5 km/h and 1,000 dollars.")
print(f"{time.process_time() - t:.4f}")
