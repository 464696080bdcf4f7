"""``streamctl bench ...``: the benchmarks that print their figures."""

from __future__ import annotations

import json
import signal
import sys

import typer

from streamctl.bench.throughput import DRIVER_MEMORY, MEASURE_S, REPEAT
from streamctl.cli.common import (
    DRIVER_MEMORY_HELP,
    JsonOption,
    memory_size,
)
from streamctl.protocol.coordinator_config import CoordinatorConfig

bench_app = typer.Typer(help="Benchmarks that print their figures.", no_args_is_help=True)


# Every benchmark runs a private stack (streamctl.bench.stack) whose processes it stops on the
# way out. Python's default for a TERM ends the process without unwinding, so the stack's
# Temporal server, coordinator workers and agents would outlive it (they run in sessions of
# their own): a TERM ends a run as Ctrl-C does instead, exit status 128 + 15 as for a process
# the TERM killed. (A callback, not a docstring: the group's help stays the Typer's.)
@bench_app.callback()
def bench_callback() -> None:
    signal.signal(signal.SIGTERM, _exit_on_term)


def _exit_on_term(signum: int, frame: object) -> None:
    sys.exit(128 + signum)


@bench_app.command("requests")
def bench_requests(
    as_json: JsonOption = False,
    catalog: str = typer.Option(
        "postgresql://postgres@127.0.0.1:5432/postgres", help="PostgreSQL server for the benchmark."
    ),
    requests: int = typer.Option(80_000, help="Requests in the batched run."),
    naive_requests: int = typer.Option(2_000, help="Requests in the one-update-per-request run."),
    sweep: bool = typer.Option(True, help="Sweep batch_size/timeout."),
    batch_size: int = typer.Option(CoordinatorConfig.batch_size, help="Coordinator batch_size."),
    timeout: float = typer.Option(CoordinatorConfig.timeout, help="Coordinator timeout (s)."),
    concurrency: int | None = typer.Option(
        None,
        min=1,
        help="Concurrent callers in the batched run; default two passes' worth "
        "(2 x batch_size): one pass is applied while the next one gathers. The sweep's "
        "points each use two passes' worth of their own batch_size.",
    ),
) -> None:
    """Batched requests/s against one update per request, same run, PostgreSQL catalog."""
    from streamctl.bench.requests import run_requests_bench

    base = CoordinatorConfig(batch_size=batch_size, timeout=timeout)
    result = run_requests_bench(catalog, requests, naive_requests, sweep, base, concurrency)
    print(json.dumps(result) if as_json else json.dumps(result, indent=2))


@bench_app.command("latency")
def bench_latency(
    as_json: JsonOption = False,
    rounds: int = typer.Option(200, min=1, help="Creates and gets measured, one at a time."),
    catalog: str | None = typer.Option(
        None, help="A PostgreSQL server URL (a scratch database on it); default a SQLite file."
    ),
) -> None:
    """One request at a time on an idle coordinator (create, get) against a Temporal update
    alone, same run."""
    from streamctl.bench.latency import run_latency_bench

    result = run_latency_bench(catalog, rounds)
    print(json.dumps(result) if as_json else json.dumps(result, indent=2))


@bench_app.command("scale")
def bench_scale(
    as_json: JsonOption = False,
    catalog: str = typer.Option(
        "postgresql://postgres@127.0.0.1:5432/postgres", help="PostgreSQL server for the benchmark."
    ),
    agents: int = typer.Option(500, min=1, help="Simulated agents."),
    queries: int = typer.Option(10_000, min=0, help="Queries placed on them."),
    capacity: int = typer.Option(25, min=1, help="Queries an agent may run."),
    large_rows: int = typer.Option(100_000, min=0, help="Catalog rows of the large sample."),
    sample_seconds: float = typer.Option(60.0, min=1.0, help="Seconds of each pass sample."),
    soak_seconds: float = typer.Option(600.0, min=1.0, help="Seconds of the RSS/history soak."),
    kill_agents: int = typer.Option(50, min=0, help="Agents killed for the failover."),
) -> None:
    """Simulated agents and queries on one coordinator: pass times at a small and a large
    catalog, RSS and history over a soak, failover after killed agents, SHOW QUERIES."""
    from streamctl.bench.scale import run_scale_bench

    result = run_scale_bench(
        catalog, agents, queries, capacity, large_rows, sample_seconds, soak_seconds, kill_agents
    )
    print(json.dumps(result) if as_json else json.dumps(result, indent=2))


@bench_app.command("events")
def bench_events(
    as_json: JsonOption = False,
    workers: int = typer.Option(1000, help="Simulated workers."),
    seconds: float = typer.Option(10.0, help="How long to send."),
    catalog: str | None = typer.Option(None, help="Catalog URL (default: a fresh SQLite file)."),
) -> None:
    """Heartbeats from many simulated workers: accepted events/s and lost events."""
    from streamctl.bench.events import run_events_bench

    result = run_events_bench(workers, seconds, catalog)
    print(json.dumps(result) if as_json else json.dumps(result, indent=2))


@bench_app.command("deploy")
def bench_deploy(
    as_json: JsonOption = False,
    rounds: int = typer.Option(20, min=1, help="Starts measured on each side."),
    master: str = typer.Option("local[2]", help="Spark master of both sides."),
) -> None:
    """StartQuery until RUNNING through the coordinator, against writeStream.start() alone."""
    from streamctl.bench.deploy import run_deploy_bench

    result = run_deploy_bench(rounds, master)
    print(json.dumps(result) if as_json else json.dumps(result, indent=2))


@bench_app.command("throughput")
def bench_throughput(
    as_json: JsonOption = False,
    rows: int = typer.Option(2_000_000, min=1, help="Rows of the generated input file."),
    repeat: int = typer.Option(
        REPEAT,
        min=1,
        help="Measured runs of each side, at least (the median counts); a side whose runs "
        f"are short runs for {MEASURE_S:g} s.",
    ),
    master: str = typer.Option("local[2]", help="Spark master of the session."),
    driver_memory: str = typer.Option(
        DRIVER_MEMORY,
        callback=memory_size,
        help=DRIVER_MEMORY_HELP + ": a windowed join holds both inputs as state in one batch.",
    ),
    query: list[str] = typer.Option(
        [], help="Run only this query (repeatable): filter_project, tumbling_group_by, ..."
    ),
) -> None:
    """Rows/s of planned queries against the same queries hand-written in PySpark."""
    from streamctl.bench.throughput import run_throughput_bench

    try:
        result = run_throughput_bench(rows, repeat, master, driver_memory=driver_memory, only=query)
    except ValueError as error:
        raise typer.BadParameter(str(error), param_hint="--query") from None
    print(json.dumps(result) if as_json else json.dumps(result, indent=2))


@bench_app.command("adversarial")
def bench_adversarial(
    as_json: JsonOption = False,
    cases: int = typer.Option(1000, "--cases", min=1, help="Hostile messages per catalog."),
    seed: int = typer.Option(0, help="Seed of the case generator (the same seed, the same cases)."),
    catalog: list[str] = typer.Option(
        ["sqlite", "postgresql://postgres@127.0.0.1:5432/postgres"],
        help="Catalogs to run on: 'sqlite' (a temporary file) or a PostgreSQL server URL "
        "(a scratch database on it). Repeat for several.",
    ),
) -> None:
    """Hostile messages through the client, the gateway, raw updates and raw signals; a canary
    request after each. Exit 1 if the coordinator wedged or a workflow task failed."""
    from streamctl.bench.adversarial import run_adversarial_bench

    result = run_adversarial_bench(
        cases, seed, [None if name == "sqlite" else name for name in catalog]
    )
    print(json.dumps(result) if as_json else json.dumps(result, indent=2))
    if not result["ok"]:
        raise typer.Exit(1)


@bench_app.command("soak")
def bench_soak(
    as_json: JsonOption = False,
    queries: int = typer.Option(20, min=1, help="Concurrent queries across two agents."),
    seconds: float = typer.Option(300.0, help="How long to watch them."),
    interval: float = typer.Option(15.0, help="Seconds between samples."),
    rate: int = typer.Option(20, min=1, help="Generator rows per second."),
) -> None:
    """Many queries on two agents for minutes: running, heartbeats, statistics, memory."""
    from streamctl.bench.soak import run_soak_bench

    result = run_soak_bench(queries, seconds, interval, rate)
    print(json.dumps(result) if as_json else json.dumps(result, indent=2))


@bench_app.command("chaos")
def bench_chaos(
    as_json: JsonOption = False,
    seconds: float = typer.Option(300.0, min=1, help="How long the load and the kills last."),
    seed: int = typer.Option(0, help="Seed of the kill schedule (the same seed, the same kills)."),
    queries: int = typer.Option(4, min=0, help="File queries on the agents."),
    agents: int = typer.Option(2, min=0, help="Spark agents (local[1], capacity 4)."),
    keep_state: bool = typer.Option(False, help="Keep the run's directory even when ok."),
) -> None:
    """Requests, heartbeats and queries while every process of a private stack (PostgreSQL
    included) is killed -9 at random times; then lost, doubled, declared dead, sink rows.
    Exit 1 if any of them is not 0 or a query is not RUNNING at the end."""
    from streamctl.bench.chaos import run_chaos_bench
    from streamctl.bench.chaos_state import ChaosSettings

    result = run_chaos_bench(
        ChaosSettings(
            seconds=seconds, seed=seed, queries=queries, agents=agents, keep_state=keep_state
        )
    )
    print(json.dumps(result) if as_json else json.dumps(result, indent=2))
    if not result["ok"]:
        raise typer.Exit(1)


@bench_app.command("exactness")
def bench_exactness(
    as_json: JsonOption = False,
    rows: int = typer.Option(5_000_000, min=1, help="Rows of the generated file."),
    keys: int = typer.Option(8, min=1, help="Distinct GROUP BY keys."),
    seed: int = typer.Option(0, help="Seed of the data and of the kill time."),
    kill_agent: bool = typer.Option(True, help="Run a second time with kill -9 of the agent."),
    master: str = typer.Option("local[2]", help="Spark master of the agent."),
) -> None:
    """A windowed COUNT/SUM/MIN/MAX over a large file on Spark against the reference engine,
    exactly; again with kill -9 of the agent in the middle."""
    import asyncio

    from streamctl.bench.exactness import ExactnessSettings, run_exactness

    settings = ExactnessSettings(
        rows=rows, keys=keys, seed=seed, kill_agent=kill_agent, master=master
    )
    result = asyncio.run(run_exactness(settings))
    print(json.dumps(result) if as_json else json.dumps(result, indent=2))
    if not result["exact"]:
        raise typer.Exit(1)


@bench_app.command("differential")
def bench_differential(
    as_json: JsonOption = False,
    cases: int = typer.Option(100, "--cases", min=1, help="Generated cases."),
    seed: int = typer.Option(0, help="Seed of the case generator (the same seed, the same cases)."),
    concurrency: int = typer.Option(8, min=1, help="Queries running at once on the agent."),
    master: str = typer.Option("local[2]", help="Spark master of the agent."),
    shrink: bool = typer.Option(True, help="Shrink the first disagreements to minimal cases."),
    extra_shapes: bool = typer.Option(
        True, help="Also stacked windows and 3-way joins (differential_cases.EXTRA_SHAPES)."
    ),
    log: str | None = typer.Option(None, help="Append one JSON line per case as it ends."),
) -> None:
    """Generated NebulaStream queries over generated data, run by the coordinator on Spark and
    by the reference engine (DuckDB); rows compared as multisets. Exit 1 on a disagreement."""
    import asyncio

    from streamctl.bench.differential import DifferentialSettings, run_differential
    from streamctl.bench.differential_cases import BASE_SHAPES, EXTRA_SHAPES

    shapes = BASE_SHAPES + (EXTRA_SHAPES if extra_shapes else ())
    settings = DifferentialSettings(
        cases=cases,
        seed=seed,
        concurrency=concurrency,
        master=master,
        shrink=shrink,
        shapes=shapes,
        log_path=log,
    )
    result = asyncio.run(run_differential(settings))
    print(json.dumps(result, default=str) if as_json else json.dumps(result, indent=2, default=str))
    if result["disagreed"]:
        raise typer.Exit(1)
