"""Settings read from the environment (the same variables locally and in docker-compose).

``STREAMCTL_TEMPORAL_ADDRESS``  Temporal frontend, default ``localhost:7233``
``STREAMCTL_NAMESPACE``         Temporal namespace, default ``default``
``STREAMCTL_CATALOG_URL``       catalog database URL, default SQLite in the state dir
``STREAMCTL_STATE_DIR``         where ``streamctl up`` keeps its files, default ``.state``
``STREAMCTL_BATCH_SIZE``        messages per pass (coordinator start), default 2000
``STREAMCTL_BATCH_TIMEOUT``     seconds to gather a batch (coordinator start), default 0.01
``STREAMCTL_FILES_DIR``         where inline ``File(...)`` paths resolve and inline sinks write,
                              default ``<state dir>/files``
``STREAMCTL_FILE_ROOTS``        more directories inline sources and sinks may use
                              (``os.pathsep``-separated), default none
"""

from __future__ import annotations

import os
from pathlib import Path


def temporal_address() -> str:
    return os.environ.get("STREAMCTL_TEMPORAL_ADDRESS", "localhost:7233")


def namespace() -> str:
    return os.environ.get("STREAMCTL_NAMESPACE", "default")


def state_dir() -> Path:
    return Path(os.environ.get("STREAMCTL_STATE_DIR", ".state")).resolve()


def catalog_url(state: Path | None = None) -> str:
    configured = os.environ.get("STREAMCTL_CATALOG_URL")
    if configured:
        return configured
    return f"sqlite:///{(state or state_dir()) / 'catalog.db'}"


def batch_size() -> int:
    return int(os.environ.get("STREAMCTL_BATCH_SIZE", "2000"))


def batch_timeout() -> float:
    return float(os.environ.get("STREAMCTL_BATCH_TIMEOUT", "0.01"))


def files_dir() -> Path:
    configured = os.environ.get("STREAMCTL_FILES_DIR")
    return Path(configured).resolve() if configured else state_dir() / "files"


def file_roots() -> tuple[Path, ...]:
    """The directories inline sources may read and inline sinks may write: the files
    directory first, then ``STREAMCTL_FILE_ROOTS``."""
    extra = os.environ.get("STREAMCTL_FILE_ROOTS", "")
    return (files_dir(), *(Path(p).resolve() for p in extra.split(os.pathsep) if p.strip()))
