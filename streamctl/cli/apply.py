"""``streamctl apply -f query.yaml register|start|stop|unregister``: the one-shot YAML form.

The file names a query and everything it needs, as NebulaStream's ``query.yaml`` does::

    query: |
      SELECT id, amount FROM orders WHERE amount > 10 INTO big
    logical:
      - name: orders
        schema:
          - {name: id, type: UINT64, nullable: false}
          - {name: amount, type: INT64}
    physical:
      - logical: orders
        type: File
        config: {file_path: /data/orders/}
    sinks:                      # or one ``sink:`` mapping
      - name: big
        type: File
        schema: [{name: id, type: UINT64}, {name: amount, type: INT64}]
        config: {file_path: /data/big}

The frontend validates the file's shape (an error names the field, ``physical[0].type``) and
formulates typed requests; the coordinator does the rest. The verbs:

* ``register``: create the logical sources, physical sources and sinks (one that exists
  already with the same definition is kept), then the query, which the coordinator places and
  starts. A query with the same statement that exists already is kept.
* ``start``: ``register`` if needed, then start the file's query if it is not running.
* ``stop``: stop the file's query (it keeps its checkpoint).
* ``unregister``: drop the file's query, then its sinks and sources where nothing else uses them
  (those still used are named and kept).

The file's query is the catalog query whose statement equals the file's ``query`` text.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from streamctl.client.client import CoordinatorClient
from streamctl.client.coordinator_errors import (
    AlreadyExists,
    CoordinatorError,
    HasDependents,
    NotFound,
)
from streamctl.protocol import messages as m

Verb = Literal["register", "start", "stop", "unregister"]


class ApplyFileError(ValueError):
    """The YAML file cannot be read or does not have the expected shape."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ColumnModel(_Strict):
    name: str = Field(min_length=1)
    type: str = Field(min_length=1)
    nullable: bool = True


class LogicalModel(_Strict):
    name: str = Field(min_length=1)
    schema_: list[ColumnModel] = Field(alias="schema", min_length=1)


class PhysicalModel(_Strict):
    logical: str = Field(min_length=1)
    type: str = Field(min_length=1)
    config: dict[str, Any] = Field(default_factory=dict)
    worker: str | None = None


class SinkModel(_Strict):
    name: str = Field(min_length=1)
    type: str = Field(min_length=1)
    schema_: list[ColumnModel] = Field(alias="schema", min_length=1)
    config: dict[str, Any] = Field(default_factory=dict)


class QueryFile(_Strict):
    query: str = Field(min_length=1)
    logical: list[LogicalModel] = Field(default_factory=list)
    physical: list[PhysicalModel] = Field(default_factory=list)
    sinks: list[SinkModel] = Field(default_factory=list)
    sink: SinkModel | None = None

    @model_validator(mode="after")
    def _one_sink_list(self) -> QueryFile:
        if self.sink is not None:
            return self.model_copy(update={"sinks": [*self.sinks, self.sink], "sink": None})
        return self


def read_query_file(path: Path) -> QueryFile:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ApplyFileError(f"{path}: cannot read it: {error.strerror}") from None
    except yaml.YAMLError as error:
        raise ApplyFileError(f"{path}: not valid YAML: {error}") from None
    if not isinstance(data, dict):
        raise ApplyFileError(
            f"{path}: expected a mapping with 'query', 'logical', 'physical' and 'sinks'"
        )
    try:
        return QueryFile.model_validate(data)
    except ValidationError as error:
        problems = "; ".join(
            f"{_field_path(problem['loc'])}: {problem['msg']}" for problem in error.errors()
        )
        raise ApplyFileError(f"{path}: {problems}") from None


def _field_path(location: tuple[Any, ...]) -> str:
    text = ""
    for part in location:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            name = "schema" if part == "schema_" else str(part)
            text += f".{name}" if text else name
    return text or "(file)"


def _columns(columns: list[ColumnModel]) -> tuple[m.ColumnSpec, ...]:
    return tuple(m.ColumnSpec(c.name, c.type, c.nullable) for c in columns)


class Applier:
    """Runs one verb; ``log`` receives a line per step for people."""

    def __init__(self, client: CoordinatorClient, spec: QueryFile, log: Any) -> None:
        self.client = client
        self.spec = spec
        self.log = log

    def run(self, verb: Verb) -> dict[str, Any]:
        if verb == "register":
            return {"query": self.register()}
        if verb == "start":
            query = self.register()
            if query["current_state"] not in ("STARTING", "RUNNING"):
                query = self.client.ask_blocking(m.StartQuery(query["id"]))
                self.log(f"started query {query['id']}")
            return {"query": query}
        found = self._find_query()
        if verb == "stop":
            if found is None:
                raise NotFound("the file's query is not registered (apply register first)")
            query = self.client.ask_blocking(m.StopQuery(found["id"]))
            self.log(f"stopping query {query['id']} ({query['current_state']})")
            return {"query": query}
        return self.unregister(found)

    def register(self) -> dict[str, Any]:
        for logical in self.spec.logical:
            self._create(
                m.CreateLogicalSource(logical.name, _columns(logical.schema_)),
                f"logical source {logical.name}",
            )
        existing = self.client.list_all_blocking(m.ListPhysicalSources())
        for physical in self.spec.physical:
            if any(_same_physical(physical, row) for row in existing):
                self.log(f"physical source for {physical.logical} exists")
                continue
            created = self.client.ask_blocking(
                m.CreatePhysicalSource(
                    physical.logical, physical.type, physical.config, physical.worker
                )
            )
            self.log(f"created physical source {created['id']} for {physical.logical}")
        for sink in self.spec.sinks:
            self._create(
                m.CreateSink(sink.name, _columns(sink.schema_), sink.type, sink.config),
                f"sink {sink.name}",
            )
        found = self._find_query()
        if found is not None:
            self.log(f"query {found['id']} exists ({found['current_state']})")
            return found
        query: dict[str, Any] = self.client.ask_blocking(m.CreateQuery(self.spec.query.strip()))
        self.log(f"registered query {query['id']} ({query['current_state']})")
        return query

    def unregister(self, found: dict[str, Any] | None) -> dict[str, Any]:
        dropped: dict[str, Any] = {"query": None, "kept": []}
        if found is not None:
            self.client.ask_blocking(m.DropQuery(found["id"]))
            dropped["query"] = found["id"]
            self.log(f"dropped query {found['id']}")
        requests: list[tuple[m.Request, str]] = [
            (m.DropSink(sink.name), f"sink {sink.name}") for sink in self.spec.sinks
        ] + [
            (m.DropLogicalSource(logical.name, cascade=True), f"logical source {logical.name}")
            for logical in self.spec.logical
        ]
        for request, label in requests:
            try:
                self.client.ask_blocking(request)
                self.log(f"dropped {label}")
            except HasDependents as error:
                dropped["kept"].append(label)
                self.log(f"kept {label}: {error.message}")
            except CoordinatorError as error:
                if error.code != "NOT_FOUND":
                    raise
        return dropped

    def _create(self, request: m.Request, label: str) -> None:
        try:
            self.client.ask_blocking(request)
            self.log(f"created {label}")
        except AlreadyExists:
            self.log(f"{label} exists")

    def _find_query(self) -> dict[str, Any] | None:
        wanted = " ".join(self.spec.query.split())
        for query in self.client.list_all_blocking(m.ListQueries()):
            if " ".join(str(query["statement"]).split()) == wanted:
                return dict(query)
        return None


def _same_physical(physical: PhysicalModel, row: dict[str, Any]) -> bool:
    """An existing physical source for the same logical source, type and (given) options."""
    if str(row["logical_source"]).casefold() != physical.logical.casefold():
        return False
    if str(row["type"]).casefold() != physical.type.casefold():
        return False
    config = row.get("config") or {}
    return all(config.get(key) == value for key, value in physical.config.items())
