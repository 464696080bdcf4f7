"""``streamctl bench chaos``: its schedule, that its figures see loss, doubles and deaths, and a
short run: 60 s of requests and 50 simulated agents' heartbeats on a private PostgreSQL
cluster with 2 coordinator workers, while one coordinator worker and the Temporal dev server
are killed -9 (no Spark: the full benchmark kills agents, their JVMs and PostgreSQL too).
Nothing acked may be lost, nothing applied twice, no healthy agent declared DEAD."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from streamctl.bench.chaos import run_chaos_bench
from streamctl.bench.chaos_figures import dead_figures, sink_figures
from streamctl.bench.chaos_state import ChaosSettings, Kill, kill_schedule


@pytest.mark.quick
def test_the_schedule_follows_the_seed_and_kills_every_target():
    full = ChaosSettings()
    assert kill_schedule(full) == kill_schedule(ChaosSettings())
    assert kill_schedule(full) != kill_schedule(ChaosSettings(seed=1))
    assert {target for _, target in kill_schedule(full)} == {
        "coordinator_worker",
        "agent",
        "spark_jvm",
        "temporal",
        "postgres",
    }
    times = [at for at, _ in kill_schedule(full)]
    assert all(30 <= at <= 225 for at in times)
    assert all(b - a >= 8 for a, b in itertools.pairwise(times))
    no_spark = ChaosSettings(seconds=60, agents=0, queries=0)
    assert {t for _, t in kill_schedule(no_spark)} == {"coordinator_worker", "temporal", "postgres"}
    with pytest.raises(ValueError, match="without agents"):
        ChaosSettings(agents=0, kills={"agent": 1}).kill_counts()


def _committed_sink(directory: Path, files: dict[str, str]) -> None:
    """A Spark file sink's output: data files and the metadata log listing them (plus one
    uncommitted file that must not be read)."""
    output = directory / "q1"
    (output / "_spark_metadata").mkdir(parents=True)
    for name, text in files.items():
        (output / name).write_text(text)
    (output / "part-uncommitted.txt").write_text("1,2\n")
    listing = [json.dumps({"path": f"file://{output / n}", "action": "add"}) for n in files]
    (output / "_spark_metadata" / "0").write_text("\n".join(["v1", *listing]) + "\n")


@pytest.mark.quick
def test_sink_figures_count_missing_repeated_and_foreign_rows(tmp_path):
    _committed_sink(tmp_path / "sink_1", {"a.txt": "1,2\n2,4\n3,6\n"})
    _committed_sink(tmp_path / "sink_2", {"a.txt": "1,2\n2,4\n", "b.txt": "2,4\n9,9\n"})
    figures = sink_figures(tmp_path, {1: 3, 2: 3})
    assert figures["sinks"]["sink_1"] == {
        "fed": 3,
        "read": 3,
        "lost": 0,
        "doubled": 0,
        "unexpected": 0,
    }
    assert figures["sinks"]["sink_2"] == {
        "fed": 3,
        "read": 4,
        "lost": 1,  # id 3
        "doubled": 1,  # id 2 twice
        "unexpected": 1,  # (9, 9) never fed
    }
    assert (figures["sink_rows_lost"], figures["sink_rows_doubled"]) == (1, 1)


@pytest.mark.quick
def test_only_deaths_of_agents_not_killed_count():
    killed = Kill("agent", at_s=10, scheduled_s=10, pid=42, which="local_1", wall=1010.0)
    jvm = Kill("spark_jvm", at_s=30, scheduled_s=30, pid=43, which="Spark JVM of local_2")
    jvm.wall = 1030.0
    changelog = [
        ("local_1", "ALIVE->SUSPECT", 1020.0),
        ("local_1", "SUSPECT->DEAD", 1040.0),  # killed, not back yet: excused
        ("local_1", "DEAD->ALIVE", 1050.0),
        ("local_1", "SUSPECT->DEAD", 1090.0),  # back since 1050: counts
        ("local_2", "SUSPECT->DEAD", 1045.0),  # only its JVM was killed: counts
        ("sim_001", "SUSPECT->DEAD", 1005.0),
    ]
    figures = dead_figures([killed, jvm], 1000.0, changelog)
    assert figures["healthy_agents_declared_dead"] == 3
    assert [t["counted"] for t in figures["dead_transitions"]] == [False, True, True, True]


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_short_chaos_run_loses_and_doubles_nothing():
    try:
        from streamctl.bench.private_postgres import postgres_bin

        postgres_bin()
    except RuntimeError as error:
        pytest.skip(str(error))
    result = run_chaos_bench(
        ChaosSettings(
            seconds=60,
            seed=1,
            agents=0,
            queries=0,
            kills={"coordinator_worker": 1, "temporal": 1},
        )
    )
    assert "error" not in result, result
    assert result["kills_total"] == 2 and result["kills_missed"] == 0, result["kills"]
    assert result["requests_acked"] > 100
    assert (result["lost"], result["doubled"], result["healthy_agents_declared_dead"]) == (
        0,
        0,
        0,
    ), result
    assert result["ok"], result
