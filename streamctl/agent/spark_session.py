"""The SparkSession every process of streamctl builds (agents, tests, benchmarks).

Spark starts Python workers for Python UDFs and ``foreachBatch`` helpers with the interpreter
PySpark's driver names: ``PYSPARK_PYTHON`` from the environment, else whatever ``python3`` is
first on PATH (PySpark ignores ``spark.pyspark.python`` for this). That interpreter usually
lacks this environment's packages, so the first UDF fails with ``No module named 'streamctl'``.
The session here pins both to the running interpreter unless the user set ``PYSPARK_PYTHON``.

An agent also needs to know whether its session still works and to replace it when it does not
(:mod:`streamctl.agent.spark_watchdog`): :func:`spark_down_reason` says why a session is dead
(its driver JVM exited, its SparkContext stopped, it does not answer), and
:func:`discard_spark_session` kills its driver JVM and clears PySpark's process-wide state, so
the next :func:`build_spark_session` launches a new JVM in the same Python process.

The JVM is launched without PySpark's ``preexec_fn`` (:func:`_launch_driver`): a
``preexec_fn`` runs Python in the forked child before ``exec``, which Python's documentation
calls unsafe in a process with threads, as an agent is (Temporal's, Py4J's, its queries'):
under load the child can hang before ``exec``, and the rebuild of a lost JVM then launches
none (see docs/decisions.md). And a launch that yields no JVM within
:data:`LAUNCH_TIMEOUT_S` is killed, so that the build fails (and the agent retries) instead of
waiting for ever, as PySpark would.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

from streamctl.spark.session_kind import is_connect

log = logging.getLogger(__name__)

COMPILE_HUGE_METHODS: Final = "-XX:-DontCompileHugeMethods"

BASE_CONFIG: Mapping[str, str] = {
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true",
    "spark.sql.session.timeZone": "UTC",
    # A stop waits for the running batch at most this long (ms) instead of forever, so a stop
    # action ends (failed, and retried) before its activity timeout.
    "spark.sql.streaming.stopTimeout": "60000",
    "spark.pyspark.python": sys.executable,
    "spark.pyspark.driver.python": sys.executable,
    # An agent runs for weeks and starts thousands of short queries: keep Spark's status
    # store (what its UI shows) to the recent ones instead of a thousand jobs, stages and
    # executions, which fill a default 1 GiB driver heap.
    "spark.ui.retainedJobs": "100",
    "spark.ui.retainedStages": "100",
    "spark.ui.retainedTasks": "10000",
    "spark.sql.ui.retainedExecutions": "100",
    "spark.sql.streaming.ui.retainedQueries": "20",
    "spark.sql.streaming.ui.retainedProgressUpdates": "20",
    # Expressions reach the driver as SQL text (streamctl.spark.sql_text), which Spark's parser
    # reads recursively, on a py4j thread with the JVM's default 1 MiB stack: a chain of 100
    # NES additions (300 nested parentheses and casts) overflows it, refused as
    # FAILED_TO_PARSE_TOO_COMPLEX; 400 pass with 16 MiB. Stacks are reserved, not committed.
    # The JIT compiles methods of any size: by default it leaves those above 8,000 bytes of
    # bytecode to the interpreter, and a stage of NES parsing, filter and formatting
    # generates such a method (Spark falls back only above 64 KB). Interpreted, its
    # processNext is most of a planned JSON filter/project's time (Java Flight Recorder);
    # compiled, that query runs in 4.4 s instead of 7.1 s (bench throughput).
    "spark.driver.extraJavaOptions": f"-Xss16m {COMPILE_HUGE_METHODS}",
    "spark.executor.extraJavaOptions": COMPILE_HUGE_METHODS,
}


class JavaMissing(RuntimeError):
    """No Java runtime for Spark on this machine."""


def require_java() -> None:
    """Spark runs on the system JDK; fail with what to install when there is none."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return
    if shutil.which("java"):
        return
    raise JavaMissing(
        "Spark needs a Java runtime (JDK 17 or 21) and none was found on PATH or in JAVA_HOME: "
        "install one, e.g. 'apt-get install openjdk-17-jre-headless', or set JAVA_HOME"
    )


def build_spark_session(
    master: str,
    app_name: str,
    warehouse: Path,
    config: Mapping[str, str] | None = None,
) -> SparkSession:
    """A session on ``master`` with the base configuration, then ``config`` on top."""
    require_java()
    from pyspark.sql import SparkSession

    from streamctl.spark.jvm_functions import with_jar
    from streamctl.spark.translate import EXECUTION_CONF

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # PySpark marks a process that once made a Spark Connect session (and every process it
    # starts afterwards) with SPARK_CONNECT_MODE_ENABLED, which turns this classic builder into
    # a Connect client with no URL: a session on ``master`` must not inherit that.
    for variable in ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE"):
        os.environ.pop(variable, None)
    builder = SparkSession.builder.master(master).appName(app_name)
    settings = with_jar(
        {
            **BASE_CONFIG,
            **EXECUTION_CONF,
            "spark.sql.warehouse.dir": str(warehouse),
            **(config or {}),
        },
        master,
    )
    for key, value in settings.items():
        builder = builder.config(key, value)
    with _launches_bounded():
        session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


LAUNCH_TIMEOUT_S: Final = 180.0
"""How long building a session may take before its driver JVM is killed (a build takes
2-10 s here, under load)."""


def _launch_driver(command: list[str], **options: Any) -> subprocess.Popen[bytes]:
    """PySpark's launch of the driver JVM (it calls ``Popen``), without the ``preexec_fn`` it
    passes to ignore SIGINT: the JVM gets a process group of its own instead, set by the fork
    itself, where a terminal's Ctrl-C does not reach it either."""
    options.pop("preexec_fn", None)
    return subprocess.Popen(command, process_group=0, **options)


@contextlib.contextmanager
def _launches_bounded() -> Any:
    """While a session is built, PySpark launches its JVM by :func:`_launch_driver`, and the
    JVMs it launched are killed once the build has taken :data:`LAUNCH_TIMEOUT_S`: PySpark
    then fails the build (``JAVA_GATEWAY_EXITED``, or a call into the dead JVM)."""
    import pyspark.java_gateway

    launched: list[subprocess.Popen[bytes]] = []
    done = threading.Event()

    def launch(command: list[str], **options: Any) -> subprocess.Popen[bytes]:
        process = _launch_driver(command, **options)
        launched.append(process)
        return process

    def watch() -> None:
        if done.wait(LAUNCH_TIMEOUT_S):
            return
        for process in [process for process in launched if process.poll() is None]:
            log.error(
                "a Spark session was not built within %.0f s: its driver JVM (pid %d) killed",
                LAUNCH_TIMEOUT_S, process.pid,
            )  # fmt: skip
            process.kill()

    original = pyspark.java_gateway.Popen  # type: ignore[attr-defined]
    pyspark.java_gateway.Popen = launch  # type: ignore[attr-defined,assignment]
    threading.Thread(target=watch, name="spark-launch-watch", daemon=True).start()
    try:
        yield
    finally:
        done.set()
        pyspark.java_gateway.Popen = original  # type: ignore[attr-defined]


MEMORY_SIZE = re.compile(r"[1-9][0-9]*(?:[kmgtp]b?|b)?", re.IGNORECASE)
"""A JVM memory size as Spark reads one (``spark.driver.memory``): ``512m``, ``2g``, ``4096``
(MiB)."""


EXIT_GRACE_S = 2.0
"""How long a driver JVM that stopped answering gets to be seen exiting."""


def check_memory_size(text: str) -> str:
    """``text`` if it is a memory size Spark accepts, else a ``ValueError`` saying so."""
    if not MEMORY_SIZE.fullmatch(text.strip()):
        raise ValueError(f"{text!r} is not a memory size such as 512m or 2g")
    return text.strip()


def driver_process(session: Any) -> subprocess.Popen[bytes] | None:
    """The driver JVM this Python process launched for a classic session (None for Spark
    Connect, or a JVM this process did not launch, as under ``spark-submit``)."""
    if is_connect(session):
        return None
    from pyspark import SparkContext

    process = getattr(SparkContext._gateway, "proc", None)
    return process if isinstance(process, subprocess.Popen) else None


def spark_down_reason(session: Any) -> str | None:
    """Why ``session`` can no longer run queries, or None while it can. Calls into Spark (one
    cheap call), so a hung driver does not answer: callers bound the wait."""
    if is_connect(session):
        if getattr(session, "is_stopped", False):
            return "the Spark Connect session was closed"
        try:
            session.conf.get("spark.sql.session.timeZone")
        except Exception as error:
            return f"the Spark Connect server does not answer: {_first_line(error)}"
        return None
    process = driver_process(session)
    if process is not None and process.poll() is not None:
        return f"the driver JVM (pid {process.pid}) {_exit_status(process.returncode)}"
    context = getattr(session, "_sc", None)
    java_context = getattr(context, "_jsc", None)
    if java_context is None:
        return "the SparkContext was stopped"
    try:
        stopped = bool(java_context.sc().isStopped())
    except Exception as error:
        if process is not None:
            # Its connection may close a moment before the dying process can be reaped: say
            # how it ended (and whether it was killed) rather than that it does not answer.
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(EXIT_GRACE_S)
            if process.poll() is not None:
                return f"the driver JVM (pid {process.pid}) {_exit_status(process.returncode)}"
        return f"the driver JVM does not answer: {_first_line(error)}"
    return "the SparkContext stopped" if stopped else None


def killed_by_signal(session: Any) -> bool:
    """Whether the driver JVM was killed by a signal (from outside: an operator, the kernel's
    OOM killer) rather than ended, stopped or hung by what Spark itself ran."""
    process = driver_process(session)
    return process is not None and process.poll() is not None and process.returncode < 0


def discard_spark_session(session: Any, timeout: float = 30.0) -> None:
    """Make sure nothing of ``session`` runs any more, and let the next session start afresh.

    Classic: kill the driver JVM this process launched (with it every streaming query of the
    session, whatever state it is in), close the Py4J gateway and the accumulator server, and
    reset PySpark's singletons, so that :func:`build_spark_session` launches a new JVM. A JVM
    this process did not launch cannot be replaced: its SparkContext is stopped and the next
    session starts on it. Spark Connect: close the session (the server's queries of this
    session stop with it)."""
    if is_connect(session):
        with contextlib.suppress(Exception):
            session.stop()
        return
    from pyspark import SparkContext
    from pyspark.sql import SparkSession, SQLContext

    process = driver_process(session)
    context = SparkContext._active_spark_context
    if process is None:
        with contextlib.suppress(Exception):
            session.stop()
        return
    if process.poll() is None:
        process.kill()
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        log.error("the driver JVM (pid %d) did not exit %.0f s after SIGKILL", process.pid, timeout)
    gateway = SparkContext._gateway
    if context is not None:
        server = getattr(context, "_accumulatorServer", None)
        if server is not None:
            with contextlib.suppress(Exception):
                server.shutdown()
                server.server_close()
        context._jsc = None  # type: ignore[assignment]
    if gateway is not None:
        with contextlib.suppress(Exception):
            gateway.shutdown()
    with SparkContext._lock:
        SparkContext._gateway = None
        SparkContext._jvm = None
        SparkContext._active_spark_context = None
    SparkSession._instantiatedSession = None
    SparkSession._activeSession = None
    SQLContext._instantiatedContext = None


def _exit_status(code: int | None) -> str:
    if code is not None and code < 0:
        return f"was killed by signal {-code}"
    if code == 52:  # SparkExitCode.OOM
        return "exited: out of memory (code 52)"
    return f"exited with code {code}"


def _first_line(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0][:300]
