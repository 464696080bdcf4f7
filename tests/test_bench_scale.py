"""``bench scale`` end to end at a small size: simulated agents (real Temporal workers, no
Spark) take every query, an agent stopped as by ``kill -9`` has its queries RUNNING elsewhere,
and ``SHOW QUERIES`` pages through all of them. Figures are printed by the benchmark, never
checked here (no timing in tests)."""

from __future__ import annotations

from streamctl.bench.scale import run_scale_bench

POSTGRES = "postgresql://postgres@127.0.0.1:5432/postgres"


def test_a_small_scale_run_places_moves_and_lists_every_query() -> None:
    result = run_scale_bench(
        POSTGRES,
        agents=6,
        queries=60,
        capacity=15,
        large_rows=3000,
        sample_seconds=3,
        soak_seconds=5,
        kill_agents=2,
    )
    assert result["large_rows"] >= 3000 > result["small_rows"]
    failover = result["failover"]
    assert failover["killed_agents"] == 2 and failover["queries_moved"] > 0
    assert failover["states_after"] == {"RUNNING": 60}
    # The breakdown found every step in the catalog (its figures are not checked).
    assert set(failover["breakdown"]) == {
        "last_heartbeat_after_kill",
        "dead_after_last_heartbeat",
        "start_after_dead",
        "running_after_start",
    }
    assert failover["breakdown"]["running_after_start"]["max"] > 0
    # The last moved queries to run elsewhere, each with its changelog story ending RUNNING.
    assert len(failover["slowest"]) == min(3, failover["queries_moved"])
    assert all(story["story"][-1][1] == "STARTING->RUNNING" for story in failover["slowest"])
    assert not result["coordinator_worker_restarted"]
    assert result["show_queries_rows"] == 60
    assert result["soak"]["rss_max_mib"] > 0
