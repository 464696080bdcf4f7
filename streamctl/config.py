"""Settings read from the environment (the same variables locally and in docker-compose).

``STREAMCTL_TEMPORAL_ADDRESS``  Temporal frontend, default ``localhost:7233``
``STREAMCTL_NAMESPACE``         Temporal namespace, default ``default``
``STREAMCTL_CATALOG_URL``       catalog database URL, default SQLite in the state dir
``STREAMCTL_STATE_DIR``         where ``streamctl up`` keeps its files, default ``.state``
``STREAMCTL_BATCH_SIZE``        messages per pass (coordinator start), default 4000
``STREAMCTL_BATCH_TIMEOUT``     seconds to gather a batch (coordinator start), default 0.01
``STREAMCTL_FILES_DIR``         where relative paths of file sources and sinks (inline or
                              catalog) resolve and inline sinks write, default
                              ``<state dir>/files``; always a file root
``STREAMCTL_FILE_ROOTS``        more directories file sources and sinks may use
                              (``os.pathsep``-separated), default none. Every path option of a
                              source or sink must lie under a file root
                              (:mod:`streamctl.domain.paths`)
``STREAMCTL_METRICS_PORT``      port of the Prometheus endpoint of ``streamctl coordinator`` and
                              ``streamctl agent`` (``--metrics-port`` wins), default 0 = none
``STREAMCTL_METRICS_HOST``      address that endpoint binds, default ``127.0.0.1`` (``0.0.0.0``
                              to be scraped from other hosts)
``STREAMCTL_GATEWAY_TOKEN``     bearer token the REST gateway (``streamctl gateway``) requires;
                              unset, the gateway refuses to start unless ``--insecure-no-auth``
``STREAMCTL_PAYLOAD_KEY``       the key that encrypts payloads carrying secrets in Temporal
                              history: base64 of 32 bytes (AES-256-GCM); several keys
                              comma-separated rotate (the first encrypts, all decrypt).
                              Default: ``<state dir>/payload.key`` if it exists (``streamctl
                              up`` writes one, mode 0600), else none: secrets then travel in
                              plaintext and each process warns once
``STREAMCTL_TEMPORAL_ENV_CONFIG`` ``0`` ignores Temporal's environment configuration (the
                              embedded stack's own processes set it), default on

Temporal's own environment configuration (``temporalio.envconfig``) applies too: the profile
``TEMPORAL_PROFILE`` (default ``default``) of ``TEMPORAL_CONFIG_FILE`` (default
``~/.config/temporalio/temporal.toml``), overridden by ``TEMPORAL_ADDRESS``,
``TEMPORAL_NAMESPACE``, ``TEMPORAL_API_KEY``, ``TEMPORAL_TLS``, ``TEMPORAL_TLS_*`` and
``TEMPORAL_GRPC_META_*``. It supplies TLS, the API key and gRPC metadata to every connection,
and the address and namespace where ``STREAMCTL_TEMPORAL_ADDRESS``/``STREAMCTL_NAMESPACE`` (or
``--address``) do not name them: explicit settings win.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

PAYLOAD_KEY_FILE = "payload.key"
PAYLOAD_KEY_BYTES = 32


def temporal_env_config_enabled() -> bool:
    return os.environ.get("STREAMCTL_TEMPORAL_ENV_CONFIG", "1").strip().lower() not in (
        "0",
        "false",
        "no",
        "off",
    )


def temporal_profile() -> Any:
    """Temporal's env-config profile (a ``temporalio.envconfig.ClientConfigProfile``), or
    ``None`` when ``STREAMCTL_TEMPORAL_ENV_CONFIG=0``. A missing default file is no error;
    a ``TEMPORAL_CONFIG_FILE`` that cannot be read or parsed is, naming the file."""
    if not temporal_env_config_enabled():
        return None
    from temporalio.envconfig import ClientConfigProfile

    try:
        return ClientConfigProfile.load(profile=os.environ.get("TEMPORAL_PROFILE") or None)
    except Exception as error:
        where = os.environ.get("TEMPORAL_CONFIG_FILE", "the default Temporal config file")
        raise ValueError(f"Temporal environment configuration ({where}): {error}") from None


def temporal_address() -> str:
    """``STREAMCTL_TEMPORAL_ADDRESS``, else the env-config profile's address, else
    ``localhost:7233``."""
    configured = os.environ.get("STREAMCTL_TEMPORAL_ADDRESS")
    if configured:
        return configured
    profile = temporal_profile()
    return (profile.address if profile is not None else None) or "localhost:7233"


def namespace() -> str:
    """``STREAMCTL_NAMESPACE``, else the env-config profile's namespace, else ``default``."""
    configured = os.environ.get("STREAMCTL_NAMESPACE")
    if configured:
        return configured
    profile = temporal_profile()
    return (profile.namespace if profile is not None else None) or "default"


def state_dir() -> Path:
    return Path(os.environ.get("STREAMCTL_STATE_DIR", ".state")).resolve()


def catalog_url(state: Path | None = None) -> str:
    configured = os.environ.get("STREAMCTL_CATALOG_URL")
    if configured:
        return configured
    return f"sqlite:///{(state or state_dir()) / 'catalog.db'}"


DEFAULT_BATCH_SIZE = 4000
"""Requests (and events) one pass takes at most. A pass costs ~45 ms whatever it holds, plus
~85 µs per request, one pass at a time: 2000 gives ~8,700 requests/s under load and 4000
~10,800 (``bench requests``, 2 cores), at no cost to one request alone (a pass runs as soon
as the batching timeout has passed, full or not)."""
DEFAULT_BATCH_TIMEOUT = 0.01


def batch_size() -> int:
    """``STREAMCTL_BATCH_SIZE``; ValueError naming the variable when it is not an integer."""
    raw = os.environ.get("STREAMCTL_BATCH_SIZE")
    return _number("STREAMCTL_BATCH_SIZE", raw, DEFAULT_BATCH_SIZE, int, "an integer")


def batch_timeout() -> float:
    """``STREAMCTL_BATCH_TIMEOUT``; ValueError naming the variable when it is not a number."""
    raw = os.environ.get("STREAMCTL_BATCH_TIMEOUT")
    return _number(
        "STREAMCTL_BATCH_TIMEOUT", raw, DEFAULT_BATCH_TIMEOUT, float, "a number of seconds"
    )


def _number(variable: str, raw: str | None, default: T, kind: Callable[[str], T], what: str) -> T:
    # Each variable is read where it is named (tests/test_compose.py finds the reads by name).
    if not raw:  # unset, or set empty, which the options' own reading takes as unset too
        return default
    try:
        return kind(raw)
    except ValueError:
        raise ValueError(f"{variable} must be {what}, not {raw[:40]!r}") from None


def files_dir(state: Path | None = None) -> Path:
    """``STREAMCTL_FILES_DIR``, else ``files`` in ``state`` (default: :func:`state_dir`)."""
    configured = os.environ.get("STREAMCTL_FILES_DIR")
    if configured:
        return Path(configured).resolve()
    return (state.resolve() if state is not None else state_dir()) / "files"


def file_roots() -> tuple[Path, ...]:
    """The directories file sources may read and file sinks may write, symlinks resolved:
    the files directory first, then ``STREAMCTL_FILE_ROOTS``."""
    extra = os.environ.get("STREAMCTL_FILE_ROOTS", "")
    configured = (files_dir(), *(Path(p) for p in extra.split(os.pathsep) if p.strip()))
    return tuple(Path(os.path.realpath(root)) for root in configured)


def gateway_token() -> str | None:
    """The REST gateway's bearer token; None when unset or empty (an empty token would let
    an empty ``Authorization: Bearer`` header in)."""
    return os.environ.get("STREAMCTL_GATEWAY_TOKEN", "").strip() or None


def parse_payload_keys(text: str, where: str = "STREAMCTL_PAYLOAD_KEY") -> tuple[bytes, ...]:
    """Comma-separated base64 keys of :data:`PAYLOAD_KEY_BYTES` bytes each; ``ValueError``
    naming ``where`` (never the key) for anything else."""
    keys: list[bytes] = []
    for number, part in enumerate((p.strip() for p in text.split(",")), start=1):
        if not part:
            continue
        try:
            key = base64.b64decode(part, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError(f"{where}: key {number} is not valid base64") from None
        if len(key) != PAYLOAD_KEY_BYTES:
            raise ValueError(
                f"{where}: key {number} is {len(key)} bytes; it must be {PAYLOAD_KEY_BYTES} "
                "(create one with: head -c 32 /dev/urandom | base64)"
            )
        keys.append(key)
    return tuple(keys)


def payload_keys(state: Path | None = None) -> tuple[bytes, ...]:
    """The payload keys: ``STREAMCTL_PAYLOAD_KEY``, else the state directory's key file, else
    none (empty)."""
    configured = os.environ.get("STREAMCTL_PAYLOAD_KEY", "").strip()
    if configured:
        return parse_payload_keys(configured)
    path = (state or state_dir()) / PAYLOAD_KEY_FILE
    try:
        text = path.read_text()
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return ()
    return parse_payload_keys(text, str(path))


def ensure_payload_key(state: Path) -> str:
    """The payload key text for the processes of an embedded stack: ``STREAMCTL_PAYLOAD_KEY``
    if set, else ``<state>/payload.key``, created (mode 0600, a new random key) if missing."""
    configured = os.environ.get("STREAMCTL_PAYLOAD_KEY", "").strip()
    if configured:
        parse_payload_keys(configured)
        return configured
    path = state / PAYLOAD_KEY_FILE
    if not path.exists():
        state.mkdir(parents=True, exist_ok=True)
        text = base64.b64encode(os.urandom(PAYLOAD_KEY_BYTES)).decode()
        # O_EXCL: two stacks racing on one state dir keep the first key, never a mixed one.
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass
        else:
            with os.fdopen(fd, "w") as file:
                file.write(text + "\n")
    text = path.read_text().strip()
    parse_payload_keys(text, str(path))
    return text


def metrics_port() -> int:
    """The Prometheus endpoint's port; 0 (the default) serves none."""
    return int(os.environ.get("STREAMCTL_METRICS_PORT", "0") or 0)


def metrics_host() -> str:
    return os.environ.get("STREAMCTL_METRICS_HOST", "").strip() or "127.0.0.1"
