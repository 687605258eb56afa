"""``sleuth serve [--bind 127.0.0.1:8080] [--config targets.toml] [--db PATH]``."""

from __future__ import annotations

import ipaddress
import signal
import socket
from pathlib import Path
from typing import Annotated

import typer

from agent.cli import app, bad_input, console, db_path


def parse_bind(bind: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:8080`` for IPv6); a one-line error names --bind."""
    host, sep, port = bind.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536 or not host:
        bad_input(f"--bind: '{bind}' is not HOST:PORT")
    return host.strip("[]"), int(port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@app.command("serve")
def serve(
    bind: Annotated[str, typer.Option(help="HOST:PORT to listen on")] = "127.0.0.1:8080",
    config: Annotated[Path | None, typer.Option(help="targets.toml: alert labels -> what to hunt")] = None,
    db: Annotated[Path | None, typer.Option("--db", help="run store (default: the config's, $SLEUTH_DB, XDG)")] = None,
) -> None:
    """Take alerts over HTTP (Alertmanager webhook or plain JSON), hunt them, and let a person
    approve or reject the proposed fix on a web page."""
    import uvicorn

    from agent.serve.app import create_app
    from agent.serve.config import ConfigError, load_config, local_problem
    from agent.serve.queue import HuntQueue

    host, port = parse_bind(bind)
    try:
        cfg = load_config(config)
    except ConfigError as exc:
        bad_input(f"--config: {exc}")
    if why := local_problem(cfg):  # a typo failed every alert's hunt job in turn, each after it came
        bad_input(f"--config: {config}: {why}")
    if why := _in_use(host, port):  # it printed its banner, then uvicorn's error, and exited 3
        bad_input(f"--bind: {bind}: {why} (another process listens there: give another port)")
    store_path = db_path(db or (Path(cfg.db) if cfg.db else None))
    store_path.parent.mkdir(parents=True, exist_ok=True)
    _one_service(store_path)
    loopback = is_loopback(host)
    if not cfg.bearer():
        console.print("no token configured (config 'token' or SLEUTH_TOKEN): alerts and approvals are refused")
    _log_to_stderr()
    queue = HuntQueue(cfg, store_path)
    web = create_app(cfg, store_path, queue, loopback=loopback)
    server = uvicorn.Server(uvicorn.Config(web, host=host, port=port, log_level="warning", access_log=False))
    queue.start()
    said = f"sleuth serve on http://{bind}  store {store_path}  {len(cfg.targets)} target(s)"
    console.print(said, highlight=False, soft_wrap=True)
    # uvicorn shuts down gracefully on SIGTERM / SIGINT, then raises the signal again to the handler
    # it found: ours turns it into an orderly stop of the queue (the running hunts get SIGTERM too).
    previous = signal.signal(signal.SIGTERM, _stop)
    try:
        server.run()
    except (_Stopped, KeyboardInterrupt):
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        queue.stop()


def _log_to_stderr() -> None:
    """The queue's lines (``agent.serve.queue.log``) on stderr, stamped, one an event."""
    import logging
    import sys

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%Y-%m-%d %H:%M:%S"))
    logger = logging.getLogger("sleuth.serve")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False


def _one_service(store_path: Path) -> None:
    """One service a store, held for the life of this process (``transcripts.lease``: the kernel
    lets go when it exits, however it exits). A second service on the same store had started
    silently, marked the first's running job `adopted` and taken its queued one: two hunts at once
    under ``concurrency = 1`` (trial 15)."""
    from transcripts.lease import RunBusy, RunLease, describe
    from transcripts.store import layout

    try:
        _SERVICE.append(RunLease(layout(store_path).serve, "the service").acquire())
    except RunBusy as exc:
        bad_input(
            f"--db: {store_path}: another sleuth serve serves this store ({describe(exc.holder)}); "
            "one service a store: stop it, or give this one another --db"
        )


_SERVICE: list = []  # the lease this process holds on its store's service, kept until it exits


def _in_use(host: str, port: int) -> str | None:
    """Why ``host:port`` cannot be listened on (another process holds it), or None."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: TIME_WAIT is no owner
        try:
            s.bind((host, port))
        except OSError as exc:
            return exc.strerror or str(exc)
    return None


class _Stopped(Exception):
    pass


def _stop(_signum: int, _frame: object) -> None:
    raise _Stopped()
