"""File paths of sources and sinks, confined to the file roots.

Protocol
--------
Anyone who can send a request or a statement names the files an agent reads and writes, so the
coordinator confines every such path before it stores it (DESIGN §5: no file paths smuggled in).
The paths are the connector options marked ``path`` in the option table
(:mod:`streamctl.planner.options`): the ``file_path`` of File sources (CSV, JSON and
Parquet alike) and of File and Checksum sinks, a Generator's ``data_dir``; and the files of a
Generator schema's ``WORDLIST <path>`` fields. Whenever the pass creates a physical source or a
sink -- ``CreatePhysicalSource``, ``CreateSink``, their statements ``CREATE PHYSICAL SOURCE ...
TYPE File SET(...)`` / ``CREATE SINK ... TYPE File SET(...)``, the gateway's routes onto them, and
inline ``FROM File(...)`` / ``INTO File(...)`` in a query -- it calls
:func:`confine_source_options` / :func:`confine_sink_options` on the canonical options, before
anything changes:

1. a relative path resolves against the files directory (``STREAMCTL_FILES_DIR``, by default
   ``<state dir>/files``); a relative ``WORDLIST`` path against the (confined) ``data_dir`` if
   one is given, as the generator reads it;
2. ``..`` and symbolic links are resolved (``os.path.realpath``: the link's target counts, not
   its name), so neither leads out;
3. the result must be a file root or lie under one (:func:`streamctl.config.file_roots`: the
   files directory and ``STREAMCTL_FILE_ROOTS``, ``streamctl up --file-root DIR``); otherwise
   the request is refused with the caller's code (``INVALID_REQUEST`` for catalog objects,
   ``INVALID_STATEMENT`` inline) and a message naming the path and the allowed directories;
4. the stored config holds the resolved absolute path, so no agent ever resolves a path against
   its own working directory.

Guarantees and limits
---------------------
* A refused request creates nothing (the handlers call this before they change the catalog).
* The check runs once, when the object is created, on the coordinator's view of the
  filesystem; a symbolic link planted inside a root afterwards is not re-checked, nor is the
  agents' filesystem (deploy agents with the same mounts).
* A sink without a path writes where the agent's own configuration says (its state dir or the
  query's checkpoint); no user-named path is involved.
* Kafka key and trust store locations (and ``kafka.*`` pass-through keys) are credentials the
  Kafka client reads to authenticate, never data a query returns: they are not confined.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from streamctl import config
from streamctl.domain.context import RequestFailed
from streamctl.error_codes import ErrorCode
from streamctl.planner import generator_schema as generator
from streamctl.planner.options import SINK_OPTIONS, SOURCE_OPTIONS, OptionSpec

_UNSAFE_IN_SCHEMA = re.compile(r"[\s,]")
"""Characters a ``WORDLIST`` path cannot hold in the generator schema's text."""


def confined_path(
    raw: str, what: str, code: str = ErrorCode.INVALID_REQUEST, base: Path | None = None
) -> str:
    """``raw`` as an absolute path inside the file roots, relative paths resolved against
    ``base`` (default: the files directory); else :class:`RequestFailed` with ``code``, the
    message starting with ``what`` ("the FILE sink's path")."""
    path = Path(raw).expanduser()
    if not path.is_absolute():
        path = (base or config.files_dir()) / path
    resolved = Path(os.path.realpath(path))
    roots = config.file_roots()
    if not any(resolved == root or root in resolved.parents for root in roots):
        shown = "" if str(resolved) == raw else f" (resolved: {resolved})"
        raise RequestFailed(
            code,
            f"{what} {raw!r}{shown} is outside the directories that file sources and sinks may "
            f"use ({', '.join(str(root) for root in roots)}); move the data there or allow "
            "its directory with STREAMCTL_FILE_ROOTS (streamctl up --file-root DIR)",
        )
    return str(resolved)


def confine_source_options(
    source_type: str,
    options: Mapping[str, Any],
    what: str,
    code: str = ErrorCode.INVALID_REQUEST,
) -> dict[str, Any]:
    """A source's canonical ``options`` with every path confined (see the module docstring);
    ``what`` names the source in messages ("the FILE source's")."""
    confined = _confine(SOURCE_OPTIONS.get(source_type, ()), options, what, code)
    if source_type == "GENERATOR" and confined.get("generator_schema"):
        confined["generator_schema"] = _confined_word_lists(
            str(confined["generator_schema"]), confined.get("data_dir"), what, code
        )
    return confined


def confine_sink_options(
    sink_type: str,
    options: Mapping[str, Any],
    what: str,
    code: str = ErrorCode.INVALID_REQUEST,
) -> dict[str, Any]:
    """A sink's canonical ``options`` with every path confined; ``what`` names the sink."""
    return _confine(SINK_OPTIONS.get(sink_type, ()), options, what, code)


def _confine(
    specs: tuple[OptionSpec, ...], options: Mapping[str, Any], what: str, code: str
) -> dict[str, Any]:
    confined = dict(options)
    for spec in specs:
        if spec.path and confined.get(spec.key):
            label = "path" if spec.key == "file_path" else spec.key
            confined[spec.key] = confined_path(str(confined[spec.key]), f"{what} {label}", code)
    return confined


def _confined_word_lists(schema: str, data_dir: Any, what: str, code: str) -> str:
    """The generator schema with each ``WORDLIST`` file confined and made absolute."""
    base = Path(str(data_dir)) if data_dir else None
    fields = list(generator.parse_generator_schema(schema))  # valid: normalized before
    for index, field in enumerate(fields):
        if isinstance(field, generator.WordListField):
            path = confined_path(field.path, f"{what} WORDLIST file", code, base)
            if _UNSAFE_IN_SCHEMA.search(path):
                raise RequestFailed(
                    code,
                    f"{what} WORDLIST file {field.path!r} resolves to {path!r}, which holds a "
                    "space or ',' that a generator schema cannot carry; use a directory "
                    "without them",
                )
            fields[index] = generator.WordListField(path)
    return generator.format_generator_schema(fields)
