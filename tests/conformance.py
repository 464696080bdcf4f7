"""Where the tests find NebulaStream's conformance folder (its suite and test data): the one
home of that lookup.

The folder is not part of this repository. ``STREAMCTL_CONFORMANCE`` names it; unset, it is
``../shared/conformance`` beside the project root (the folder holding ``pyproject.toml``), the
layout of a checkout next to the shared NebulaStream material. A test that needs the folder
skips when it is absent, saying where it looked and which setting moves it:

* :data:`needs_suite` marks a test (a ``skipif`` evaluated at import, which never fails);
* :func:`require_suite` skips from inside a test or fixture;
* :func:`suite_params` parametrizes over the suite's files, and is one skipped case without it.

``test_conformance_location`` fails when a file under ``tests/`` or ``streamctl/`` builds a
path to ``../shared`` itself instead of asking this module.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

ENV_VAR = "STREAMCTL_CONFORMANCE"


def project_root() -> Path:
    """The folder holding ``pyproject.toml`` above this file."""
    here = Path(__file__).resolve().parent
    for folder in (here, *here.parents):
        if (folder / "pyproject.toml").is_file():
            return folder
    raise RuntimeError(f"no pyproject.toml above {here}")


def conformance_dir() -> Path:
    """``$STREAMCTL_CONFORMANCE`` (relative to the working directory), else
    ``<project root>/../shared/conformance``."""
    configured = os.environ.get(ENV_VAR, "").strip()
    if configured:
        return Path(configured).expanduser().resolve()
    return (project_root().parent / "shared" / "conformance").resolve()


def systests_dir() -> Path:
    """The suite: ``nes-systests`` (its ``*.test`` files by folder, and ``testdata/``)."""
    return conformance_dir() / "nes-systests"


def suite_testdata() -> Path:
    """The suite's ``testdata/`` (the files its sources read, word lists)."""
    return systests_dir() / "testdata"


def missing_reason(path: Path | None = None) -> str:
    """Why a test that needs ``path`` (default: the suite) skips."""
    where = systests_dir() if path is None else path
    return f"NebulaStream conformance suite not found at {where}: set {ENV_VAR}"


def suite_present() -> bool:
    return systests_dir().is_dir()


needs_suite = pytest.mark.skipif(not suite_present(), reason=missing_reason())
"""Mark a test that reads the suite or its test data."""


def require_suite() -> Path:
    """The suite's folder, or skip the calling test (or fixture) when it is absent."""
    if not suite_present():
        pytest.skip(missing_reason())
    return systests_dir()


def suite_params(
    paths: Callable[[Path], Sequence[Path]], ids: Callable[[Path], str] = str
) -> list[Any]:
    """``paths(<suite folder>)`` as ``pytest.param`` values with ``ids``; without the suite
    a single case that skips with :func:`missing_reason` (so collection never fails and the
    skip says why)."""
    if not suite_present():
        skip = pytest.mark.skip(reason=missing_reason())
        return [pytest.param(None, id="no-conformance-suite", marks=skip)]
    return [pytest.param(path, id=ids(path)) for path in paths(systests_dir())]
