"""OpenAI-compatible HTTP API: /v1/completions, /v1/chat/completions (SSE streaming), /v1/models, /health."""

import itertools
import json
import logging
import sys
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from minisglang.entrypoints.engine import Engine
from minisglang.managers.scheduler import Req
from minisglang.utils import logger

_ids = itertools.count()


class ApiError(Exception):
    def __init__(self, status: int, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.param = status, message, param


def _parse_generation(body: dict, chat: bool, tokenizer) -> tuple[str, int, bool, bool]:
    if chat:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ApiError(400, "'messages' must be a non-empty list", "messages")
        prompt = "\n".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))
    else:
        prompt = body.get("prompt")
        if isinstance(prompt, list):
            prompt = " ".join(str(p) for p in prompt)
        if not isinstance(prompt, str):
            raise ApiError(400, "'prompt' must be a string or a list of strings", "prompt")
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens", 16))
    if not isinstance(max_tokens, int) or max_tokens < 1:
        raise ApiError(400, "'max_tokens' must be a positive integer", "max_tokens")
    stream = bool(body.get("stream", False))
    include_usage = bool((body.get("stream_options") or {}).get("include_usage", False))
    return prompt, max_tokens, stream, include_usage


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    engine: Engine

    def log_message(self, format: str, *args) -> None:
        logger.debug("%s - %s", self.address_string(), format % args)

    def _send_json(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send_error(self, err: ApiError) -> None:
        self._send_json(
            err.status,
            {
                "error": {
                    "message": err.message,
                    "type": "InternalServerError" if err.status >= 500 else "invalid_request_error",
                    "param": err.param,
                    "code": err.status if err.status >= 500 else None,
                }
            },
        )

    def _chunk(self, payload: dict | str) -> None:
        text = payload if isinstance(payload, str) else json.dumps(payload)
        data = f"data: {text}\n\n".encode()
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def do_GET(self) -> None:
        name = self.engine.server_args.served_model_name
        if self.path == "/health":
            dead = self.engine.scheduler.dead
            self._send_json(503 if dead else 200, {"status": "unhealthy", "error": dead} if dead else {"status": "ok"})
        elif self.path == "/get_server_info":
            import minitorch

            dev = minitorch.cuda.device()
            self._send_json(
                200,
                {
                    "version": minitorch.__version__,
                    "device_time_us": dev.clock_us,
                    "kernel_calls": dict(dev.calls),
                    "eager_kernel_calls": dict(dev.eager_calls),
                    "kernel_work": dict(dev.work),
                },
            )
        elif self.path == "/v1/models":
            self._send_json(
                200,
                {
                    "object": "list",
                    "data": [{"id": name, "object": "model", "created": 0, "owned_by": "minisglang", "root": name}],
                },
            )
        else:
            self._send_error(ApiError(404, f"not found: {self.path}"))

    def do_POST(self) -> None:
        try:
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except json.JSONDecodeError as exc:
                raise ApiError(400, f"invalid JSON body: {exc}") from exc
            if not isinstance(body, dict):
                raise ApiError(400, "request body must be a JSON object")
            if self.path == "/v1/completions":
                self._generate(body, chat=False)
            elif self.path == "/v1/chat/completions":
                self._generate(body, chat=True)
            else:
                raise ApiError(404, f"not found: {self.path}")
        except ApiError as err:
            self._send_error(err)

    def _generate(self, body: dict, chat: bool) -> None:
        tm = self.engine.tokenizer_manager
        prompt, max_tokens, stream, include_usage = _parse_generation(body, chat, tm)
        rid = f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex[:24]}"
        req = Req(rid, tm.count_tokens(prompt), max_tokens)
        words = tm.detokenizer(prompt, int(body.get("seed") or next(_ids)))
        created = int(time.time())
        model = body.get("model") or self.engine.server_args.served_model_name
        obj = "chat.completion" if chat else "text_completion"
        usage = {"prompt_tokens": req.prompt_tokens}
        self.engine.scheduler.add_request(req)

        def pieces():
            while (n := req.out.get()) is not None:
                if isinstance(n, Exception):
                    raise ApiError(500, f"internal server error: {n}")
                yield "".join(next(words) for _ in range(n))

        def choice(text: str, finish: str | None) -> dict:
            if chat:
                return {"index": 0, "delta": {"content": text}, "logprobs": None, "finish_reason": finish}
            return {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}

        if not stream:
            text = "".join(pieces())  # ApiError(500) when the scheduler dies: answered by do_POST
            usage.update(completion_tokens=req.generated, total_tokens=req.prompt_tokens + req.generated)
            ch = (
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "logprobs": None,
                    "finish_reason": "length",
                }
                if chat
                else {"index": 0, "text": text, "logprobs": None, "finish_reason": "length"}
            )
            self._send_json(
                200, {"id": rid, "object": obj, "created": created, "model": model, "choices": [ch], "usage": usage}
            )
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        chunk_obj = obj + ".chunk" if chat else obj
        head = {"id": rid, "object": chunk_obj, "created": created, "model": model}
        if chat:
            self._chunk(
                head
                | {
                    "choices": [
                        {
                            "index": 0,
                            "delta": {"role": "assistant", "content": ""},
                            "logprobs": None,
                            "finish_reason": None,
                        }
                    ]
                }
            )
        try:
            for text in pieces():
                self._chunk(head | {"choices": [choice(text, None)]})
        except ApiError as err:  # headers are sent: the error travels as an SSE event, as SGLang's does
            self._chunk({"error": {"message": err.message, "type": "InternalServerError", "code": err.status}})
            self._chunk("[DONE]")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
            return
        self._chunk(head | {"choices": [choice("", "length")]})
        if include_usage:
            usage.update(completion_tokens=req.generated, total_tokens=req.prompt_tokens + req.generated)
            self._chunk(head | {"choices": [], "usage": usage})
        self._chunk("[DONE]")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


def launch_server(server_args) -> None:
    logging.basicConfig(
        level=getattr(logging, server_args.log_level.upper(), logging.INFO),
        format="[%(asctime)s] %(message)s",
        datefmt="%Y-%m-%d %H:%M:%S",
        stream=sys.stdout,
    )
    engine = Engine(server_args)
    Handler.engine = engine
    httpd = ThreadingHTTPServer((server_args.host, server_args.port), Handler)
    httpd.daemon_threads = True
    logger.info("The server is fired up and ready to roll! (http://%s:%d)", server_args.host, server_args.port)
    sys.stdout.flush()
    try:
        httpd.serve_forever(poll_interval=0.1)
    except KeyboardInterrupt:
        pass
