"""The scheduler: one thread owns the device, admits requests, runs prefill and decode steps."""

import os
import queue
import threading
import time
import traceback

import minitorch as torch

from minisglang.utils import Batch, logger


class Req:
    def __init__(self, rid: str, prompt_tokens: int, max_new_tokens: int) -> None:
        self.rid = rid
        self.prompt_tokens = prompt_tokens
        self.max_new_tokens = max_new_tokens
        self.generated = 0
        self.finished = False
        self.out: queue.Queue = queue.Queue()  # ints (new tokens), then None when finished

    def fail(self, message: str) -> None:
        """The request cannot finish (the scheduler died): its handler answers with an error."""
        self.out.put(RuntimeError(message))

    def emit(self, n: int) -> bool:
        n = min(n, self.max_new_tokens - self.generated)
        self.generated += n
        self.out.put(n)
        if self.generated >= self.max_new_tokens:
            self.out.put(None)
            self.finished = True
            return True
        return False


class Scheduler:
    def __init__(self, server_args, model_runner, spec_worker=None) -> None:
        self.server_args = server_args
        self.model_runner = model_runner
        self.spec_worker = spec_worker
        self.waiting: queue.Queue = queue.Queue()
        self.running: list[Req] = []
        self.forward_ct = 0
        self._interval_tokens = 0
        self._interval_start_us = 0.0
        self._accept_lens: list[int] = []
        self._verify_us: list[float] = []
        self.dead: str | None = None  # why the scheduler stopped; the server then answers 500 and exits
        self.unfinished: set[Req] = set()  # admitted or waiting: what a dying scheduler must fail
        self._busy_since: float | None = None  # wall time the current forward batch started

    def add_request(self, req: Req) -> None:
        if self.dead is not None:
            req.fail(self.dead)
            return
        self.unfinished.add(req)
        self.waiting.put(req)

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self._run, name="scheduler", daemon=True)
        thread.start()
        timeout = self.server_args.watchdog_timeout
        if timeout and timeout > 0:
            threading.Thread(target=self._watchdog, args=(timeout,), name="watchdog", daemon=True).start()
        return thread

    def _run(self) -> None:
        try:
            self.event_loop()
        except Exception:
            logger.error("Scheduler hit an exception: %s", traceback.format_exc())
            self._die("scheduler died: " + traceback.format_exc().strip().splitlines()[-1])

    def _watchdog(self, timeout: float) -> None:
        """As SGLang's: a forward batch that takes longer than ``timeout`` (simulated seconds)
        crashes the server instead of leaving every request waiting forever."""
        wall = timeout * torch.cuda.device().time_scale
        while self.dead is None:
            time.sleep(min(0.1, wall / 4))
            since = self._busy_since
            if since is not None and time.monotonic() - since > wall:
                logger.error("Scheduler watchdog timeout (self.watchdog_timeout=%s, self.soft=False)", f"{timeout:g}")
                self._die(f"watchdog timeout: a forward batch ran longer than {timeout:g} s")
                return

    def _die(self, why: str) -> None:
        """Fail every request, then exit the whole server (SGLang: SIGQUIT to the parent)."""
        self.dead = why
        for req in list(self.unfinished):
            req.fail(why)

        def quit_later() -> None:
            time.sleep(0.5)  # let the handlers answer their 500s first
            logger.error("Received sigquit from a child process. It usually means the child failed.")
            for h in logger.handlers + logger.root.handlers:
                h.flush()
            os._exit(1)

        threading.Thread(target=quit_later, daemon=True).start()

    def _admit(self) -> list[Req]:
        """Waiting requests, up to ``max_running_requests`` in the decode batch; the rest wait."""
        new = []
        block = not self.running
        while len(self.running) + len(new) < self.server_args.max_running_requests:
            try:
                new.append(self.waiting.get(block=block, timeout=None if block else 0))
            except queue.Empty:
                return new
            block = False
        return new

    def event_loop(self) -> None:
        while True:
            for req in self._admit():
                self._busy_since = time.monotonic()
                self.prefill(req)
                self._busy_since = None
            if self.running:
                self._busy_since = time.monotonic()
                self.decode_step()
                self._busy_since = None

    def prefill(self, req: Req) -> None:
        self.model_runner.forward_extend(Batch(1, max(1, req.prompt_tokens)))
        torch.cuda.synchronize()
        if not req.emit(1):
            self.running.append(req)
        else:
            self.unfinished.discard(req)

    def decode_step(self) -> None:
        torch.cuda.launch("scheduler")
        # @site step
        batch = len(self.running)
        if self.spec_worker is not None:
            accepted, verify_us = self.spec_worker.step(batch)
            self._verify_us.append(verify_us)
            self._accept_lens.extend(accepted)
        else:
            self.model_runner.forward_decode(Batch(batch))
            accepted = [1] * batch
        torch.cuda.synchronize()
        pairs = list(zip(accepted, self.running, strict=True))
        self._interval_tokens += sum(min(a, r.max_new_tokens - r.generated) for a, r in pairs)
        self.running = [r for a, r in pairs if not r.emit(a)]
        self.unfinished.difference_update(r for _a, r in pairs if r.finished)
        self.forward_ct += 1
        if self.forward_ct % self.server_args.decode_log_interval == 0:
            self.log_decode_stats(batch)

    def log_decode_stats(self, batch: int) -> None:
        now_us = torch.cuda.device().clock_us
        elapsed_s = max(1e-9, (now_us - self._interval_start_us) / 1e6)
        msg = f"Decode batch. #running-req: {batch}, #token: {self._interval_tokens}, "
        if self.spec_worker is not None and self._verify_us:
            accept = sum(self._accept_lens) / max(1, len(self._accept_lens))
            verify_ms = sum(self._verify_us) / len(self._verify_us) / 1000.0
            msg += f"accept len: {accept:.2f}, verify time: {verify_ms:.2f} ms, "
        msg += f"gen throughput (token/s): {self._interval_tokens / elapsed_s:.2f}, #queue-req: {self.waiting.qsize()}"
        logger.info(msg)
        self._interval_tokens = 0
        self._interval_start_us = now_us
        self._accept_lens.clear()
        self._verify_us.clear()
