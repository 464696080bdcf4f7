"""Issue 18, acceptance e: every ``.test`` file of a folder as its own ``streamctl systest``
invocation against one ``streamctl up`` stack, the whole folder ``--passes`` times in a row,
compared query by query with a reference run (one invocation over the folder on a fresh stack).

    .venv/bin/python scripts/systest_per_file.py ../shared/conformance/nes-systests \\
        --state-dir /tmp/per-file-stack --port 7471 --ui-port 8471 \\
        --reference /tmp/whole-folder.json --out /tmp/per-file.json

Without ``--address`` it starts the stack itself (``up --detach`` with the suite's
``testdata/`` as a file root) and stops it at the end; with ``--address`` it uses a running
one (give its ``--state-dir``). After each pass it lists what the stack's catalog still holds
(every file must have dropped what it created). It prints one line per pass (``passed failed
unsupported``, objects left) and every query whose status differs from the reference, and
writes everything to ``--out``. Exit 1 if any pass differs from the reference or left objects.
``--compare-only`` compares the passes an earlier run wrote to ``--out`` with ``--reference``
(when the reference ran at the same time as the passes).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def streamctl(*args: str, timeout: float = 3600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "streamctl.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=ROOT,
    )


def statuses(queries: list[dict[str, Any]]) -> dict[tuple[str, int], str]:
    return {(q["file"], q["index"]): q["status"] for q in queries}


def counts(queries: list[dict[str, Any]]) -> dict[str, int]:
    return {s: sum(q["status"] == s for q in queries) for s in ("passed", "failed", "unsupported")}


def left_in_catalog(address: str, state_dir: Path) -> dict[str, int]:
    """How many logical sources, sinks and queries the stack's catalog holds."""
    found: dict[str, int] = {}
    for what in ("LOGICAL SOURCES", "SINKS", "QUERIES"):
        result = streamctl(
            "sql", f"SHOW {what}", "--json", "--address", address, "--state-dir", str(state_dir)
        )
        try:
            answer = json.loads(result.stdout)
            rows = answer["statements"][0]["result"] if isinstance(answer, dict) else answer
            found[what.lower()] = len(rows if isinstance(rows, list) else rows.get("rows", []))
        except (ValueError, KeyError, IndexError, TypeError):
            found[what.lower()] = -1  # unreadable answer: shown, never taken for empty
    return found


def run_pass(
    files: list[Path], address: str, state_dir: Path, jobs: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    queries: list[dict[str, Any]] = []
    per_file: list[dict[str, Any]] = []
    for path in files:
        started = time.monotonic()
        result = streamctl(
            "systest", str(path), "--json", "-j", str(jobs),
            "--address", address, "--state-dir", str(state_dir),
        )  # fmt: skip
        seconds = round(time.monotonic() - started, 1)
        try:
            report = json.loads(result.stdout)
        except ValueError:
            report = {"queries": [], "error": (result.stdout + result.stderr)[-2000:]}
        queries.extend(report["queries"])
        per_file.append(
            {
                "file": str(path),
                "seconds": seconds,
                "exit": result.returncode,
                **counts(report["queries"]),
            }
        )
        print(f"  {path.name}: {counts(report['queries'])} in {seconds} s", flush=True)
    return queries, per_file


def differences_from(
    reference: dict[tuple[str, int], str], mine: dict[tuple[str, int], str]
) -> list[dict[str, Any]]:
    return [
        {
            "file": key[0],
            "index": key[1],
            "reference": reference.get(key),
            "this_pass": mine.get(key),
        }
        for key in sorted(set(reference) | set(mine))
        if reference.get(key) != mine.get(key)
    ]


def compare_only(out: Path, reference_file: Path | None) -> int:
    if reference_file is None:
        print("--compare-only needs --reference", file=sys.stderr)
        return 2
    whole = json.loads(reference_file.read_text())
    reference = statuses(whole["queries"])
    print(f"reference: {counts(whole['queries'])}")
    failed = False
    for one in json.loads(out.read_text())["passes"]:
        differences = differences_from(reference, statuses(one["queries"]))
        failed |= bool(differences) or any(one["left_in_catalog"].values())
        print(
            f"pass {one['pass']}: {counts(one['queries'])}, left in catalog "
            f"{one['left_in_catalog']}, {len(differences)} differences from the reference"
        )
        for difference in differences:
            print(f"  differs: {difference}")
    return 1 if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--state-dir", type=Path, required=True)
    parser.add_argument("--address", help="a running stack (default: start one)")
    parser.add_argument("--port", type=int, default=7471)
    parser.add_argument("--ui-port", type=int, default=8471)
    parser.add_argument("--passes", type=int, default=2)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--reference", type=Path, help="JSON of `systest FOLDER --json`")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--compare-only", action="store_true")
    args = parser.parse_args()
    if args.compare_only:
        return compare_only(args.out, args.reference)
    folder = args.folder.resolve()
    files = sorted(folder.rglob("*.test"))
    state_dir = args.state_dir.resolve()
    address = args.address
    if address is None:
        up = streamctl(
            "up", "--detach", "--state-dir", str(state_dir), "--port", str(args.port),
            "--ui-port", str(args.ui_port), "--file-root", str(folder / "testdata"),
        )  # fmt: skip
        if up.returncode != 0:
            print(up.stdout + up.stderr, file=sys.stderr)
            return 2
        address = f"127.0.0.1:{args.port}"
    reference = None
    if args.reference is not None:
        reference = statuses(json.loads(args.reference.read_text())["queries"])
    passes: list[dict[str, Any]] = []
    failed = False
    try:
        for number in range(1, args.passes + 1):
            print(f"pass {number}: {len(files)} files", flush=True)
            started = time.monotonic()
            queries, per_file = run_pass(files, address, state_dir, args.jobs)
            left = left_in_catalog(address, state_dir)
            mine = statuses(queries)
            differences = [] if reference is None else differences_from(reference, mine)
            summary = {
                "pass": number,
                **counts(queries),
                "seconds": round(time.monotonic() - started, 1),
                "left_in_catalog": left,
                "differences_from_reference": differences,
                "files": per_file,
                "queries": queries,
            }
            passes.append(summary)
            failed |= bool(differences) or any(left.values())
            print(
                f"pass {number}: {counts(queries)}, left in catalog {left}, "
                f"{len(differences)} differences from the reference, {summary['seconds']} s",
                flush=True,
            )
            for difference in differences:
                print(f"  differs: {difference}", flush=True)
            args.out.write_text(json.dumps({"address": address, "passes": passes}, indent=1))
    finally:
        if args.address is None:
            streamctl("down", "--state-dir", str(state_dir), timeout=300)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
