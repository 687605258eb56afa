"""Which number of a benchmark's output is the sample, and which way is better.

Real serving benchmarks print a table and write JSON: ``python -m sglang.bench_serving
--output-file F`` appends one JSON line per run to F (``output_throughput``, ``p99_ttft_ms``,
``median_itl_ms``, ...); ``vllm bench serve --save-result --result-filename F`` writes one JSON
object (``output_throughput``, ``total_token_throughput``, ``p99_tpot_ms``, ...). The last number
such a tool prints is not the metric anyone alerted on, so a metric is named:

- ``name``: a key of the JSON the benchmark wrote (its output file, else the last JSON object on
  stdout); a JMESPath expression (``results[0].p99_ttft_ms``) reaches nested values;
- ``regex``: for plain text, the first group (or the whole match) of the regex's last match;
- neither: the last number printed, the old rule, with a warning saying so.

The direction is known for the common names (throughputs and rates higher; ``*_ms``, latencies,
TTFT/ITL/TPOT lower) and can always be given.
"""

from __future__ import annotations

import json
import re

import jmespath
from jmespath.exceptions import JMESPathError
from pydantic import BaseModel, model_validator

from tools.text import first_line

NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
LAST_NUMBER_WARNING = (
    "no --metric or --metric-regex named: the sample is the last number the benchmark prints "
    "(for sglang.bench_serving or vllm bench serve, name the key, e.g. --metric p99_ttft_ms)"
)

# Benchmarks that print a table whose last number is nobody's metric: a command naming one, with no
# metric named, is warned. A command of one's own that prints one number (what the getting-started
# page asks for) is not: a trial's every --bench hunt was warned about sglang and vLLM.
SERVING_BENCHMARK = re.compile(
    r"bench_serving|benchmark_serving|vllm\s+bench|genai-perf|aiperf|guidellm|llmperf|bench_one_batch", re.I
)

_HIGHER = re.compile(r"throughput|tok_per_s|tokens_per_s|per_s(ec)?$|_qps$|^qps$|rps|accept_len|goodput", re.I)
_LOWER = re.compile(r"_ms$|_s$|_us$|latency|ttft|itl|tpot|tbt|e2el|duration|time|seconds", re.I)


class MetricError(ValueError):
    """The benchmark's output does not hold the named metric (one line, for the probe's error)."""


# The statistic at the end of a path says nothing about the direction: aiperf writes
# ``time_to_first_token.p50``, guidellm ``...time_to_first_token_ms.successful.median``.
_STATISTIC = re.compile(r"^(p\d+|avg|mean|median|min|max|std|sum|successful|total|value|percentiles|\d+|)$", re.I)


def higher_is_better(name: str) -> bool | None:
    """The direction of a metric known by its name, or None when the name does not say: the last
    segment of a path that is not a statistic decides."""
    segments = [p for p in re.split(r"[.\[\]]", name.strip()) if not _STATISTIC.match(p)]
    leaf = segments[-1] if segments else name
    if _HIGHER.search(leaf):
        return True
    if _LOWER.search(leaf):
        return False
    return None


class MetricSpec(BaseModel):
    """How to read one sample out of a benchmark's output."""

    name: str | None = None  # a JSON key / JMESPath expression
    regex: str | None = None  # for plain text
    output: str | None = None  # the file the benchmark writes (relative to its working directory)

    @model_validator(mode="after")
    def _one_way(self) -> MetricSpec:
        if self.name and self.regex:
            raise ValueError("metric: give a name (JSON key) or a regex, not both")
        if self.regex:
            try:
                re.compile(self.regex)
            except re.error as exc:
                raise ValueError(f"'{self.regex}' is not a regex ({exc})") from None
        if self.name:
            try:
                jmespath.compile(self.name)
            except JMESPathError as exc:
                why = first_line(exc).rstrip(":")
                raise ValueError(f"'{self.name}' is not a JSON key or path ({why})") from None
        return self

    def read(self, stdout: str, written: str | None = None) -> float:
        """The sample: from ``written`` (the output file's text) when the benchmark wrote one,
        else from ``stdout``."""
        if self.regex:
            return _by_regex(self.regex, written if written is not None else stdout)
        if self.name:
            doc = last_json(written) if written is not None else last_json(stdout)
            if doc is None:
                where = f"the output file {self.output}" if written is not None else "the benchmark's stdout"
                raise MetricError(f"{where} holds no JSON object to read '{self.name}' from")
            return _by_name(self.name, doc)
        numbers = NUMBER.findall(stdout)
        if not numbers:
            raise MetricError("the benchmark printed no number")
        return float(numbers[-1])


def last_json(text: str) -> dict | None:
    """The last JSON object in ``text``: the whole text when it is one (vLLM's result file), else
    the last line that parses as an object (sglang's appended JSONL, or a tool that prints its
    result as the last line of a log)."""
    stripped = text.strip()
    if not stripped:
        return None
    try:
        whole = json.loads(stripped)
        if isinstance(whole, dict):
            return whole
    except ValueError:
        pass
    for line in reversed(stripped.splitlines()):
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if isinstance(doc, dict):
                return doc
    return None


def _by_name(name: str, doc: dict) -> float:
    value = jmespath.search(name, doc)
    if value is None:
        keys = ", ".join(sorted(k for k, v in doc.items() if isinstance(v, int | float))[:12])
        raise MetricError(f"no '{name}' in the benchmark's JSON (numbers it has: {keys})")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise MetricError(f"'{name}' in the benchmark's JSON is {value!r}, not a number")
    return float(value)


def _by_regex(pattern: str, text: str) -> float:
    matches = list(re.finditer(pattern, text, re.M))
    if not matches:
        raise MetricError(f"metric-regex '{pattern}' matches nothing in the benchmark's output")
    m = matches[-1]
    raw = m.group(1) if m.groups() else m.group(0)
    found = NUMBER.search(raw or "")
    if not found:
        raise MetricError(f"metric-regex '{pattern}' matched '{raw}', which holds no number")
    return float(found.group(0))
