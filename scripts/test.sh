#!/usr/bin/env bash
# The test suite: lint, types, then every test (unit, Spark, PostgreSQL, load and faults).
# Extra arguments go to one serial pytest run instead (for example: scripts/test.sh -m quick).
set -euo pipefail
cd "$(dirname "$0")/.."

# The PostgreSQL tests need the server on 127.0.0.1:5432; start a local cluster if one is
# installed but not running (where none exists they skip, saying so).
if command -v pg_isready >/dev/null && ! pg_isready -h 127.0.0.1 -p 5432 -q; then
  if command -v pg_ctlcluster >/dev/null && [ -d /etc/postgresql ]; then
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | sort -V | tail -1)" main start || true
  fi
fi

# The documentation site (docs/, mkdocs.yml): strict, so a broken link or anchor fails here.
# It is built into a temporary directory, never into the repository.
docs_site=$(mktemp -d)
trap 'rm -rf "$docs_site"' EXIT
.venv/bin/mkdocs build --strict --site-dir "$docs_site/site"

.venv/bin/ruff check streamctl tests
.venv/bin/ruff format --check streamctl tests
.venv/bin/mypy streamctl
if [ "$#" -gt 0 ]; then
  .venv/bin/python -m pytest "$@"
  exit
fi
# Most tests wait (on Temporal, Spark, timers) more than they compute, so the suite runs on two
# workers, a file at a time (a file's module fixtures stay shared), each worker with its own
# Temporal dev server and SparkSession. A test that restarts a service the whole machine shares
# (marked "alone") runs afterwards with nothing beside it.
.venv/bin/python -m pytest -n 2 --dist loadfile -m "not alone"
.venv/bin/python -m pytest -m alone
