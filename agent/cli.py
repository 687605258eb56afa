"""The ``sleuth`` command line.

Command groups of other rooms (``sleuth lab ...`` from ``evals``) are plugged in through the
``perf_sleuth.cli`` entry-point group, so this module never imports upward (DESIGN.md's
"arrows only point down"). Exit codes: 0 success, 1 the work itself failed, 2 bad input.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import sqlite3
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from agent import process_start

if TYPE_CHECKING:
    from tools.bench import BenchResult

app = typer.Typer(
    name="sleuth",
    no_args_is_help=True,
    add_completion=False,
    help="perf-sleuth: triage performance regressions in LLM-serving stacks.",
)
console = Console(stderr=True)

# The host's options, shared by ``sleuth hunt`` and ``sleuth bisect`` (an alert may carry them too).
SlotsOpt = Annotated[
    int | None, typer.Option(min=1, help="servers the host holds at once (default: the alert's, else 1)")
]
LaunchTimeoutOpt = Annotated[
    float | None,
    typer.Option(
        min=0.001,
        help="seconds from launch to healthy; with --bench, the bound of its first run, before a run was timed "
        "(default: the alert's, else 1800)",
    ),
]
BusyWaitOpt = Annotated[
    float | None,
    typer.Option(min=0, help="seconds a launch waits for GPUs another process holds (default: the alert's, else 600)"),
]
SetupOpt = Annotated[str | None, typer.Option(help="command run in each probe's worktree before the launch (a build)")]
TracePathsOpt = Annotated[
    bool | None,
    typer.Option(
        "--trace-paths/--no-trace-paths",
        help="launches print the modules they import, so commits touching none are not bisected "
        "(default: a benchmark command is traced by one extra run per end, launches are not)",
    ),
]
out = Console()


def bad_input(message: str) -> NoReturn:
    """One line naming the field or file, exit code 2."""
    console.print(f"[red]error:[/red] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(2)


def db_path(db: Path | None, must_exist: bool = False) -> Path:
    """The run store a command opens (``--db``, ``$SLEUTH_DB``, the XDG default), or one line
    naming where a path that cannot be a store came from, exit 2."""
    from transcripts.store import store_file

    try:
        return store_file(db, must_exist)
    except ValueError as exc:
        bad_input(str(exc))


def output_file(flag: str, path: Path) -> Path:
    """A file a command will write (``--out``, ``--report``), checked before any work is done: its
    folder must be there. An evaluation ran 37 s and then died on a missing folder, its results
    printed nowhere."""
    folder = path.absolute().parent
    if path.is_dir():
        bad_input(f"{flag}: {path} is a folder; give a file name in it")
    if not folder.is_dir():
        bad_input(f"{flag}: {folder}: no such folder")
    return path


def print_json(payload: object) -> None:
    sys.stdout.write(json.dumps(payload, indent=2, default=str) + "\n")


def progress(transient: bool = True, disable: bool = False) -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=transient,
        disable=disable,
    )


def bench_table(res: BenchResult, metric: str | None = None) -> Table:
    """The run's metrics under bench_serving's names (what ``--metric`` and alerts use)."""
    t = Table(title=f"{res.config.model} @ {res.config.endpoint}", show_header=True)
    t.add_column("metric")
    t.add_column("value", justify="right")
    m = res.metrics()
    rows = [
        ("tok_per_s", "decode tok/s"),
        ("output_throughput", "output tok/s (incl. prefill)"),
        ("request_throughput", "requests/s"),
    ]
    for name, label in rows:
        t.add_row(f"{label}  [dim]{name}[/dim]", f"{m[name]:.2f}", style="bold" if name == metric else None)
    for kind in ("ttft", "itl", "tpot", "e2e_latency"):
        names = [f"{s}_{kind}_ms" for s in ("mean", "median", "p90", "p99")]
        if names[0] in m:
            bold = metric in names
            t.add_row(
                f"{kind} mean / median / p90 / p99 (ms)  [dim]{{mean,median,p90,p99}}_{kind}_ms[/dim]",
                " / ".join(f"{m[n]:.1f}" for n in names),
                style="bold" if bold else None,
            )
    if res.verify_ms is not None:
        t.add_row("verify time (server log, ms)  [dim]verify_ms[/dim]", f"{res.verify_ms:.2f}")
    if res.accept_len is not None:
        t.add_row("accept length (server log)  [dim]accept_length[/dim]", f"{res.accept_len:.2f}")
    t.add_row("requests ok / failed", f"{len(res.samples) - res.errors} / {res.errors}")
    return t


@app.command()
def bench(
    endpoint: Annotated[str, typer.Option(help="OpenAI-compatible base URL, e.g. http://127.0.0.1:30000/v1")],
    model: Annotated[str, typer.Option(help="model name to request")],
    requests: Annotated[int, typer.Option(min=1, help="number of requests")] = 4,
    concurrency: Annotated[int, typer.Option(min=1, help="requests in flight at once")] = 1,
    max_tokens: Annotated[int, typer.Option(min=1, help="max_tokens per request")] = 64,
    prompt: Annotated[str | None, typer.Option(help="prompt text (default: a fixed technical question)")] = None,
    api: Annotated[str, typer.Option(help="completions | chat")] = "completions",
    time_scale: Annotated[float, typer.Option(min=0.0001, help="lab servers: their clock scale (1.0 for real)")] = 1.0,
    server_log: Annotated[Path | None, typer.Option(help="server log to read verify time from")] = None,
    timeout: Annotated[float, typer.Option(min=0.001, help="per-request timeout, seconds")] = 120.0,
    input_len: Annotated[int | None, typer.Option(min=1, help="prompt of about this many tokens")] = None,
    request_rate: Annotated[
        float | None, typer.Option(min=0.0001, help="requests per second, Poisson arrivals (default: all at once)")
    ] = None,
    metric: Annotated[
        str | None, typer.Option(help="print this metric's value last (p99_ttft_ms, output_throughput, ...)")
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="print the full result as JSON (with `metrics`)")] = False,
) -> None:
    """Benchmark an OpenAI-compatible endpoint: tok/s, TTFT, ITL, TPOT and latency percentiles."""
    from tools.bench import SERVER_METRICS, BenchConfig, run_bench

    if metric is not None and metric not in SERVER_METRICS:
        bad_input(f"--metric: '{metric}' is not a metric sleuth bench measures (e.g. p99_ttft_ms, output_throughput)")
    if api not in ("completions", "chat"):
        bad_input(f"--api: must be 'completions' or 'chat', not '{api}'")
    if not endpoint.startswith(("http://", "https://")):
        bad_input(f"--endpoint: '{endpoint}' is not an http(s) URL")
    if server_log is not None and not server_log.is_file():
        bad_input(f"--server-log: {server_log}: no such file")
    api_kind: Literal["completions", "chat"] = "chat" if api == "chat" else "completions"
    cfg = BenchConfig(
        endpoint=endpoint,
        model=model,
        requests=requests,
        concurrency=concurrency,
        max_tokens=max_tokens,
        api=api_kind,
        time_scale=time_scale,
        timeout_s=timeout,
        server_log=server_log,
        input_len=input_len,
        request_rate=request_rate,
        **({"prompt": prompt} if prompt else {}),
    )
    with progress() as bar:
        task = bar.add_task("benchmark", total=requests)
        res = run_bench(cfg, on_done=lambda _s: bar.advance(task))
    failed = res.errors == len(res.samples)
    values = {} if failed else res.metrics()
    if json_out:
        print_json(res.model_dump(mode="json") | {"metrics": values})
    elif not failed:  # a table of zeros measured nothing
        out.print(bench_table(res, metric))
        if metric is not None and metric in values:
            out.print(f"{metric}: {values[metric]:.6g}")
    if failed:
        said = escape(res.samples[0].error or "")
        console.print(f"[red]all {res.errors} requests failed:[/red] {said}", soft_wrap=True)
        raise typer.Exit(1)


@app.callback()
def _group() -> None:
    """(A group even when a start registers one command: ``sleuth bench`` stays ``sleuth bench``.)"""


# The module that defines each command. A start imports only the one it runs: the hunt's graph,
# scipy and matplotlib cost seconds of CPU, and ``sleuth runs``, an approval from the web page or
# a service job should not pay them. ``register()`` (help, an unknown name, tests) imports all.
# Within a command, scipy (``tools.stats``) and the openai SDK (``tools.bench``, ``agent.llm``) are
# imported where first used: they were half of the CPU of a hunt's, an approval's or a
# rejection's start (2.7 s of 5.3 here), and a rejection or a ``--bench`` hunt never needs the SDK.
COMMAND_MODULES = {
    "bisect": "agent.bisect_cmd",
    **dict.fromkeys(("demo", "hunt", "approve", "reject", "resume"), "agent.hunt_cmd"),
    **dict.fromkeys(("import", "export"), "agent.import_cmd"),
    "replay": "agent.replay_cmd",
    **dict.fromkeys(("runs", "show", "search"), "agent.runs_cmd"),
    "serve": "agent.serve_cmd",
}


def _load_plugins(only: str | None = None) -> bool:
    """A plugin is a Typer app (a command group, `sleuth lab ...`) or a function (one command).
    ``only``: just the plugin of that name. Whether any was loaded."""
    loaded = False
    for ep in importlib.metadata.entry_points(group="perf_sleuth.cli"):
        if only is not None and ep.name != only:
            continue
        obj = ep.load()
        if isinstance(obj, typer.Typer):
            app.add_typer(obj, name=ep.name)
        else:
            app.command(ep.name)(obj)
        loaded = True
    return loaded


_registered = False


def register() -> None:
    """Attach every command to ``app`` (once): ours, then the plugins of the other rooms."""
    global _registered
    if _registered:
        return
    for module in dict.fromkeys(COMMAND_MODULES.values()):
        importlib.import_module(module)
    _load_plugins()
    _registered = True


def register_for(argv: list[str]) -> None:
    """Attach only what ``sleuth ARGV`` runs (its first word names the command); anything else,
    ``--help`` included, gets every command."""
    name = argv[0] if argv else None
    if name == "bench":
        return
    if name in COMMAND_MODULES:
        importlib.import_module(COMMAND_MODULES[name])
        return
    if name is None or name.startswith("-") or not _load_plugins(only=name):
        register()


def _die_with_parent() -> None:
    """A job of ``sleuth serve`` (``SLEUTH_DIE_WITH_PARENT`` = the service's pid) gets SIGTERM
    when the service dies, however it dies (Linux ``PR_SET_PDEATHSIG``), and stops as on any
    SIGTERM: servers stopped, worktrees removed. The variable is not passed on to what it starts."""
    import ctypes
    import signal

    parent = os.environ.pop("SLEUTH_DIE_WITH_PARENT", None)
    if not parent or not sys.platform.startswith("linux"):
        return
    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
    if os.getppid() != int(parent):  # the service died before the request: too late for the kernel
        os.kill(os.getpid(), signal.SIGTERM)


# Flag pairs of which one run takes one: click lets the last one given win, silently (a hunt
# given both directions read a 31 % latency rise as "no regression").
EXCLUSIVE_FLAGS = (("--lower-is-better", "--higher-is-better"),)


def main() -> None:
    """The console script. A usage error (an option out of range, an unknown option, two flags of
    one pair) is one line on stderr, exit 2, as every other bad input is; click framed it in a box
    of several lines."""
    process_start.mark()  # a hunt's wall budget counts this process's imports too
    _die_with_parent()
    argv = sys.argv[1:]
    for pair in EXCLUSIVE_FLAGS:
        if all(flag in argv for flag in pair):
            sys.stderr.write(f"error: {'/'.join(pair)}: give one, not both\n")
            sys.exit(2)
    try:
        register_for(argv)
    except KeyboardInterrupt:  # Ctrl-C while the commands load: no traceback
        sys.stderr.write("interrupted\n")
        sys.exit(130)
    if ("--help" in argv or "-h" in argv) and not sys.stdout.isatty():
        # Help into a pipe or a file (``| less``) was drawn 80 columns wide, and the option names
        # cut ("--higher-is-bet..."). Typer reads the width once, when it draws help; only then,
        # so no hunt passes the variable on to what it launches.
        os.environ.setdefault("TERMINAL_WIDTH", "120")
    try:
        code = app(standalone_mode=False)
    except typer.TyperException as exc:  # typer's click: a usage error, a bad parameter
        said = exc.format_message() if hasattr(exc, "format_message") else str(exc)
        sys.stderr.write(f"error: {' '.join(said.split())}\n")
        sys.exit(getattr(exc, "exit_code", 2))
    except typer.Abort as exc:
        if isinstance(exc.__cause__, KeyboardInterrupt):  # click's word for a Ctrl-C no command handled
            sys.stderr.write("interrupted\n")
            sys.exit(130)
        sys.stderr.write("Aborted!\n")
        sys.exit(1)
    except KeyboardInterrupt:  # Ctrl-C before a command took charge of it: no traceback
        sys.stderr.write("interrupted\n")
        sys.exit(130)
    except (sqlite3.DatabaseError, ValueError) as exc:
        # A store SQLite cannot read as one (a truncated copy): bad input, with the file where it
        # is known. A locked, busy or full store is not (the commands that write say how to resume).
        from transcripts.store import DamagedStore

        if isinstance(exc, DamagedStore) or type(exc) is sqlite3.DatabaseError:
            sys.stderr.write(f"error: {' '.join(str(exc).split())}\n")
            sys.exit(2)
        raise
    sys.exit(code if isinstance(code, int) else 0)


def one_workload(bench: str | None, launch: str | None) -> None:
    """A benchmark command or a server to launch and benchmark, not both: given both, the command
    was used and the launch silently ignored. A command's placeholders spelt as sleuth fills them
    (a launch's: ``check_launch``)."""
    if bench and launch:
        bad_input(
            "--bench/--launch: give one: a command that prints the number (--bench) or a server to "
            "launch and benchmark (--launch)"
        )
    from tools.server import misspelt_placeholder

    if bench and (why := misspelt_placeholder(bench, ("worktree", "out"))):
        bad_input(f"--bench: {why}")


def check_launch(flag: str, launch: str) -> None:
    """A launch template must say where the server listens: ``{port}``, a free port sleuth picks
    per launch and then waits on. Without it the server listened elsewhere and every state waited
    out the launch timeout (30 minutes by default) before "does not become healthy". A misspelt
    placeholder (``misspelt_placeholder``) is said first: ``{prot}`` is why ``{port}`` is missing."""
    from tools.server import misspelt_placeholder

    if why := misspelt_placeholder(launch, ("worktree", "port")):
        bad_input(f"{flag}: {why}")
    if "{port}" not in launch:
        bad_input(
            f"{flag}: '{launch}' has no {{port}}: the server must listen on the port sleuth gives it "
            "(e.g. ... --port {port}); {worktree} is the probe's checkout"
        )


def off_the_line(git, good: str, bad: str) -> str | None:
    """A warning when ``good`` is not an ancestor of ``bad`` (a release branch's tag, a side
    branch): the range is then what ``bad`` has and ``good`` lacks, from their merge base, as
    git bisect's is, while the good end is still measured at ``good`` itself."""
    if git.is_ancestor(good, bad):
        return None
    base = git.merge_base(good, bad)
    return (
        f"--good {good} is not an ancestor of {bad}: the range is the commits since their merge base "
        f"{base[:10]}, and the good end is measured at {good} itself (its own branch's changes move it)"
    )
