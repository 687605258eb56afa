"""Benchmark client for any OpenAI-compatible endpoint (the lab's server, vLLM, SGLang, Ollama...).

Sends N streaming requests with concurrency C through the official ``openai`` SDK (its events
read as plain lines, see ``_events``) and measures, per request, time to first token,
inter-token latency, latency and decode rate. ``tok_per_s``
is the decode throughput (output tokens after the first / time after the first token), the
number SGLang's decode log reports as "gen throughput"; ``output_tok_per_s`` also counts
prefill and queueing (tokens / wall time of the run).

``time_scale``: the lab's servers run on a scaled clock (0.2 = five times faster than the
simulated device); durations are divided by it so results read in the scenario's own units.
Leave it at 1.0 for real servers.
"""

from __future__ import annotations

import functools
import json
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

import numpy as np
from pydantic import BaseModel, Field

from tools.serverlog import ServerLog, read_log

if TYPE_CHECKING:  # imported where a client is made: a second of CPU at every start of the CLI
    import openai

try:  # the openai SDK's own HTTP layer: httpx2 in openai 3, httpx before
    from httpx2 import RequestError, TimeoutException, create_ssl_context
except ImportError:  # pragma: no cover - an older openai
    from httpx import RequestError, TimeoutException, create_ssl_context

DEFAULT_PROMPT = (
    "Explain, step by step, how speculative decoding with a draft head and a verify pass speeds up "
    "generation on a tensor-parallel mixture-of-experts model, and when it can make things slower."
)


# Every name ``BenchResult.metrics()`` can give (what a server workload's metric may be).
SERVER_METRICS = frozenset(
    {
        "tok_per_s",
        "output_tok_per_s",
        "output_throughput",
        "request_throughput",
        "ttft_s",
        "latency_s",
        "verify_ms",
        "accept_length",
    }
    | {
        f"{s}_{k}_ms"
        for s in ("mean", "median", "std", "p90", "p95", "p99")
        for k in ("ttft", "itl", "tpot", "e2e_latency")
    }
)


class BenchConfig(BaseModel):
    endpoint: str = Field(description="base URL of the OpenAI-compatible API, e.g. http://127.0.0.1:30000/v1")
    model: str
    requests: int = Field(default=4, ge=1)
    concurrency: int = Field(default=1, ge=1)
    prompt: str = DEFAULT_PROMPT
    max_tokens: int = Field(default=64, ge=1)
    api: Literal["completions", "chat"] = "completions"
    time_scale: float = Field(default=1.0, gt=0)
    timeout_s: float = Field(default=120.0, gt=0)
    api_key: str = "EMPTY"
    server_log: Path | None = None
    fail_fast: bool = False  # after a failed request, send no more (a hung server costs one timeout, not N)
    # The workload's shape, as bench_serving's --random-input / --max-concurrency / --request-rate:
    input_len: int | None = Field(default=None, ge=1, description="prompt of about this many tokens")
    request_rate: float | None = Field(default=None, gt=0, description="requests/s, Poisson arrivals")


def prompt_of(tokens: int) -> str:
    """A prompt of about ``tokens`` tokens (four characters a token, as BPE vocabularies give on
    English text): the default prompt repeated and cut."""
    chars = 4 * tokens
    text = DEFAULT_PROMPT
    while len(text) < chars:
        text += " " + DEFAULT_PROMPT
    return text[:chars]


class RequestSample(BaseModel):
    index: int
    ok: bool
    error: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    ttft_s: float = 0.0
    latency_s: float = 0.0
    decode_s: float = 0.0  # first token to last token
    itl_s: list[float] = []
    decode_tok_per_s: float = 0.0


class Percentiles(BaseModel):
    mean: float
    p50: float
    p90: float
    p99: float

    @classmethod
    def of(cls, values: list[float]) -> Percentiles:
        if not values:
            return cls(mean=0.0, p50=0.0, p90=0.0, p99=0.0)
        x = np.asarray(values, dtype=float)
        p50, p90, p99 = (float(v) for v in np.percentile(x, [50, 90, 99]))
        return cls(mean=float(x.mean()), p50=p50, p90=p90, p99=p99)


class BenchResult(BaseModel):
    config: BenchConfig
    samples: list[RequestSample]
    errors: int
    duration_s: float
    tok_per_s: float
    output_tok_per_s: float
    completion_tokens: int
    ttft_s: Percentiles
    itl_s: Percentiles
    latency_s: Percentiles
    server_tok_per_s: list[float] = []
    verify_ms: float | None = None
    accept_len: float | None = None

    def metrics(self) -> dict[str, float]:
        """Every metric of this run by name: ``sglang.bench_serving``'s names where they mean the
        same thing (``output_throughput``, ``request_throughput``, ``{mean,median,std,p90,p95,p99}_
        {ttft,itl,tpot,e2e_latency}_ms``), plus ``tok_per_s`` (decode rate) and the older names
        ``output_tok_per_s``, ``ttft_s`` and ``latency_s`` (medians, seconds). What an alert, a
        hunt's ``--metric`` and ``sleuth bench --json`` (``metrics``) use."""
        ok = [s for s in self.samples if s.ok]
        out: dict[str, float] = {
            "tok_per_s": self.tok_per_s,
            "output_tok_per_s": self.output_tok_per_s,
            "output_throughput": self.output_tok_per_s,
            "request_throughput": len(ok) / self.duration_s if self.duration_s > 0 else 0.0,
            "ttft_s": self.ttft_s.p50,
            "latency_s": self.latency_s.p50,
        }
        per_kind = {
            "ttft": [s.ttft_s for s in ok],
            "itl": [x for s in ok for x in s.itl_s],
            "tpot": [s.decode_s / (s.completion_tokens - 1) for s in ok if s.completion_tokens > 1],
            "e2e_latency": [s.latency_s for s in ok],
        }
        for kind, seconds in per_kind.items():
            if not seconds:
                continue
            ms = np.asarray(seconds, dtype=float) * 1000
            out[f"mean_{kind}_ms"] = float(ms.mean())
            out[f"median_{kind}_ms"] = float(np.median(ms))
            out[f"std_{kind}_ms"] = float(ms.std())
            for q in (90, 95, 99):
                out[f"p{q}_{kind}_ms"] = float(np.percentile(ms, q))
        if self.verify_ms is not None:
            out["verify_ms"] = self.verify_ms
        if self.accept_len is not None:
            out["accept_length"] = self.accept_len
        return out

    def metric(self, name: str) -> float:
        """One metric by name; a clear error naming the ones there are."""
        values = self.metrics()
        if name not in values:
            raise KeyError(f"no metric '{name}' (known: {', '.join(sorted(values))})")
        return values[name]


class _FileLog:
    def __init__(self, path: Path) -> None:
        self.path = path

    def log_size(self) -> int:
        return self.path.stat().st_size

    def log(self, offset: int = 0) -> ServerLog:
        return read_log(self.path, offset)


def _open(client: openai.OpenAI, cfg: BenchConfig, index: int):
    """The streaming request, through the SDK (its request, auth, status errors and timeouts)."""
    common = {
        "model": cfg.model,
        "max_tokens": cfg.max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
        "seed": index,
    }
    if cfg.api == "chat":
        messages = [{"role": "user", "content": cfg.prompt}]
        return client.chat.completions.with_streaming_response.create(messages=messages, **common)
    return client.completions.with_streaming_response.create(prompt=cfg.prompt, **common)


OVERRAN = "timed out: no complete answer within"  # a request past its time: the stream stayed open


class _Overran(Exception):
    """A request's stream outlived its time (``BenchConfig.timeout_s`` is the whole request's, not
    one read's): a server that sends keep-alive comments every second never trips a read timeout,
    and held a hunt past its wall budget, deaf to the first SIGTERM (a trial's dripping server)."""


def _events(response, deadline: float = float("inf")) -> Iterator[dict]:
    """The stream's events as plain dicts, read line by line as the serving projects' own
    benchmark clients read them (``sglang.bench_serving``, ``vllm bench serve``). The SDK's
    typed chunk per token costs twice the CPU (0.6 vs 0.3 ms a token on a lab server), and on a
    two-core host a measuring client's CPU is taken from the server it measures. Errors are the
    SDK's own, as its stream raises them: an error event, a timeout, a dropped connection."""
    import openai

    try:
        for line in response.iter_lines():
            if time.perf_counter() > deadline:
                raise _Overran()
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data.startswith("[DONE]"):
                return
            event = json.loads(data)
            if isinstance(event, dict) and event.get("error"):
                err = event["error"]
                message = err.get("message") if isinstance(err, dict) else None
                if not isinstance(message, str) or not message:
                    message = "An error occurred during streaming"
                raise openai.APIError(message, response.http_request, body=err)
            yield event
    except TimeoutException as exc:
        raise openai.APITimeoutError(request=response.http_request) from exc
    except RequestError as exc:
        raise openai.APIConnectionError(request=response.http_request) from exc


def _said(exc: Exception, cfg: BenchConfig) -> str:
    """A failed request in words a person can act on: the SDK's "Connection error." names neither
    the URL nor why, and a 404 neither the path asked nor that the other API may be the one the
    server has (a chat-only server asked for completions)."""
    import openai

    said = f"{type(exc).__name__}: {exc}"
    url = getattr(getattr(exc, "request", None), "url", None) or cfg.endpoint
    if isinstance(exc, openai.APITimeoutError):
        return f"{said} ({url} gave no answer within {cfg.timeout_s:g} s)"
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        why = str(cause).strip() if cause is not None and str(cause).strip() else "nothing answered"
        return f"{said} (POST {url}: {why})"
    if isinstance(exc, openai.NotFoundError):
        other = "chat" if cfg.api == "completions" else "completions"
        return f"{said} (POST {url}: no such path; a {other}-only server takes --api {other})"
    return said


def _one(client: openai.OpenAI, cfg: BenchConfig, index: int) -> RequestSample:
    import openai

    scale = cfg.time_scale
    start = time.perf_counter()
    first: float | None = None
    last = start
    itl: list[float] = []
    chunks = 0
    usage: dict | None = None
    chat = cfg.api == "chat"
    try:
        with _open(client, cfg, index) as response:
            for event in _events(response, start + cfg.timeout_s):
                if event.get("usage"):
                    usage = event["usage"]
                choices = event.get("choices")
                if not choices:
                    continue
                c = choices[0]
                text = (c.get("delta") or {}).get("content") if chat else c.get("text")
                if not text:
                    continue
                now = time.perf_counter()
                if first is None:
                    first = now
                else:
                    itl.append((now - last) / scale)
                last = now
                chunks += 1
    except openai.OpenAIError as exc:
        return RequestSample(index=index, ok=False, error=_said(exc, cfg))
    except _Overran:
        return RequestSample(index=index, ok=False, error=f"{OVERRAN} {cfg.timeout_s:g} s (the stream stayed open)")
    except ValueError as exc:  # not JSON: a proxy's page, a truncated line
        return RequestSample(index=index, ok=False, error=f"malformed stream event: {exc}")
    end = time.perf_counter()
    if first is None:
        return RequestSample(index=index, ok=False, error="no tokens received")
    completion = int(usage.get("completion_tokens") or chunks) if usage is not None else chunks
    decode_s = (last - first) / scale
    return RequestSample(
        index=index,
        ok=True,
        prompt_tokens=int(usage.get("prompt_tokens") or 0) if usage is not None else 0,
        completion_tokens=completion,
        ttft_s=(first - start) / scale,
        latency_s=(end - start) / scale,
        decode_s=decode_s,
        itl_s=itl,
        decode_tok_per_s=(completion - 1) / decode_s if decode_s > 0 and completion > 1 else 0.0,
    )


def _outcome(future: Future, index: int, bound: float) -> RequestSample:
    """A request's sample, or why there is none: still open past the run's bound, or an error its
    thread raised (the client closed under it)."""
    if not future.done():
        return RequestSample(index=index, ok=False, error=f"{OVERRAN} {bound:.0f} s (the run's bound)")
    exc = future.exception()
    if exc is not None:
        return RequestSample(index=index, ok=False, error=f"{type(exc).__name__}: {exc}")
    return future.result()


def _arrivals(cfg: BenchConfig) -> list[float]:
    """When each request is sent (wall seconds after the start): all at once, or Poisson arrivals
    at ``request_rate`` per simulated second (seeded: the same schedule every sample, so a rate
    is part of the workload, not a source of noise). Concurrency still caps the requests in flight."""
    if cfg.request_rate is None:
        return [0.0] * cfg.requests
    rng = np.random.default_rng(0)
    gaps = rng.exponential(1.0 / cfg.request_rate, cfg.requests) * cfg.time_scale
    gaps[0] = 0.0
    return list(np.cumsum(gaps))


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """One TLS context for every run of this process, made as the SDK's HTTP client makes its
    own (the same trust store and ``SSL_CERT_FILE``). Each new client otherwise loads the CA
    bundle again, about 0.1 s of CPU: half the client's CPU in a lab sample, taken on a
    two-core host from the server being measured."""
    return create_ssl_context()


class LogSource(Protocol):
    """Where the server's log can be read from (a ``tools.server.Server``, local or over SSH)."""

    def log_size(self) -> int: ...
    def log(self, offset: int = 0) -> ServerLog: ...


def run_bench(
    cfg: BenchConfig, on_done: Callable[[RequestSample], None] | None = None, server: LogSource | None = None
) -> BenchResult:
    """Run the benchmark; ``on_done`` is called (from worker threads) after each request.

    The server's log (``server``, or the local file ``cfg.server_log``) is read for the span of
    the run only, for the verify time and acceptance length it reports."""
    import openai

    client = openai.OpenAI(
        base_url=cfg.endpoint,
        api_key=cfg.api_key,
        timeout=cfg.timeout_s,
        max_retries=0,
        http_client=openai.DefaultHttpxClient(verify=_tls_context(), timeout=cfg.timeout_s),
    )
    if server is None and cfg.server_log is not None and cfg.server_log.exists():
        server = _FileLog(cfg.server_log)
    log_offset = server.log_size() if server is not None else 0
    lock = threading.Lock()
    failed = threading.Event()

    if cfg.input_len is not None:
        cfg = cfg.model_copy(update={"prompt": prompt_of(cfg.input_len)})
    arrivals = _arrivals(cfg)

    def task(i: int) -> RequestSample:
        wait = arrivals[i] - (time.perf_counter() - start)
        if wait > 0:
            time.sleep(wait)
        if cfg.fail_fast and failed.is_set():
            return RequestSample(index=i, ok=False, error="not sent: an earlier request failed")
        s = _one(client, cfg, i)
        if not s.ok:
            failed.set()
        if on_done is not None:
            with lock:
                on_done(s)
        return s

    start = time.perf_counter()
    # Waited for with a bound, never for ever: a request whose stream never ends is its thread's,
    # and an interrupt (SIGTERM, Ctrl-C) leaves at once, where the pool's own exit waited for every
    # request still open (the first SIGTERM of a hunt on a dripping server did nothing).
    rounds = -(-cfg.requests // cfg.concurrency)
    bound = (arrivals[-1] if arrivals else 0.0) + rounds * cfg.timeout_s + 5.0
    pool = ThreadPoolExecutor(max_workers=cfg.concurrency)
    try:
        futures = [pool.submit(task, i) for i in range(cfg.requests)]
        wait(futures, timeout=bound)
        samples = [_outcome(f, i, bound) for i, f in enumerate(futures)]
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
        client.close()  # a read still open fails at its next byte or read timeout: its thread ends
    duration = (time.perf_counter() - start) / cfg.time_scale
    ok = [s for s in samples if s.ok]
    tokens = sum(s.completion_tokens for s in ok)
    decode_tokens = sum(max(0, s.completion_tokens - 1) for s in ok)
    decode_time = sum(s.decode_s for s in ok)
    result = BenchResult(
        config=cfg,
        samples=samples,
        errors=len(samples) - len(ok),
        duration_s=duration,
        tok_per_s=decode_tokens / decode_time if decode_time > 0 else 0.0,
        output_tok_per_s=tokens / duration if duration > 0 else 0.0,
        completion_tokens=tokens,
        ttft_s=Percentiles.of([s.ttft_s for s in ok]),
        itl_s=Percentiles.of([x for s in ok for x in s.itl_s]),
        latency_s=Percentiles.of([s.latency_s for s in ok]),
    )
    if server is not None:
        log = server.log(log_offset)
        result.server_tok_per_s = log.throughput
        result.verify_ms = float(np.mean(log.verify_ms)) if log.verify_ms else None
        result.accept_len = float(np.mean(log.accept_len)) if log.accept_len else None
    return result
