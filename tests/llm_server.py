"""A scripted OpenAI-compatible chat-completions server on 127.0.0.1 for the LLM tests (the one
honest stand-in: no model runs here). Each POST pops the next scripted step: a reply (content
and/or tool calls), an HTTP status to fail with (and a ``retry-after-ms``
hint, 10 ms unless ``retry_after_ms`` says otherwise), or a delay longer than the client's timeout; or
a function of the request body that returns one (a scripted model that reads what it is shown)."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class ScriptedLLM:
    def __init__(self, script: list[dict[str, Any]]) -> None:
        self.script = list(script)
        self.requests: list[dict] = []
        self.errors: list[str] = []  # scripted steps that raised
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                owner.requests.append(body)
                step = owner.script.pop(0) if owner.script else {"status": 500}
                if callable(step):  # a reactive step: it reads the request (a model that reads its input)
                    try:
                        step = step(body)
                    except Exception as exc:  # a script that cannot go on: a 400 ends the run, visibly
                        owner.errors.append(f"{type(exc).__name__}: {exc}")
                        step = {"status": 400}
                if "delay" in step:
                    time.sleep(step["delay"])
                    step = {"content": "too late"}
                if "raw" in step:  # a body that is no chat completion (a proxy's HTML page)
                    data = step["raw"].encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "text/html")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                if "status" in step:
                    error = {"error": {"message": f"scripted {step['status']}", "type": "scripted"}}
                    self._send(step["status"], error, {"retry-after-ms": str(step.get("retry_after_ms", 10))})
                    return
                calls = [
                    {
                        "id": f"call_{len(owner.requests)}_{i}",
                        "type": "function",
                        "function": {"name": n, "arguments": a},
                    }
                    for i, (n, a) in enumerate(step.get("tool_calls", []))
                ]
                message = {
                    "role": "assistant",
                    "content": step.get("content"),
                    **({"tool_calls": calls} if calls else {}),
                }
                self._send(
                    200,
                    {
                        "id": "chatcmpl-scripted",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": body.get("model", "scripted"),
                        "choices": [
                            {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
                        ],
                        "usage": {
                            "prompt_tokens": step.get("prompt_tokens", 100),
                            "completion_tokens": step.get("completion_tokens", 20),
                            "total_tokens": 120,
                        },
                    },
                )

            def _send(self, status: int, payload: dict, headers: dict[str, str] | None = None) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                with contextlib.suppress(BrokenPipeError):  # the client gave up waiting (the timeout steps)
                    self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> ScriptedLLM:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
