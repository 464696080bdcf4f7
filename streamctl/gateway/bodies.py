"""The gateway's own bodies: the request bodies (``*Spec``), ``Health`` and the problem shape.

The response bodies are the coordinator's answers, declared once in
:mod:`streamctl.protocol.answers`; the routes name those classes as their response models,
so the OpenAPI document describes the answers the pass builds.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from streamctl.limits import MAX_PAGE_ROWS


class _Body(BaseModel):
    """A request body: unknown fields are a mistake of the caller, refused with their name."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class ColumnSpec(BaseModel):
    """A column of a schema in a request body (``nullable`` unless it says otherwise)."""

    name: str
    type: str = Field(description="NebulaStream type name, e.g. UINT64, INT32, FLOAT64, VARSIZED")
    nullable: bool = True


class StatementSpec(_Body):
    text: str = Field(description="NebulaStream statements, separated by ';'.")
    limit: int | None = Field(
        None,
        ge=1,
        le=MAX_PAGE_ROWS,
        description="A text that is one SHOW answers one page of at most this many rows and, "
        "while more follow, `next`: the cursor to send as `after` with the same text.",
    )
    after: str | None = Field(
        None, description="With limit and a single SHOW: the cursor of the page to answer."
    )


class LogicalSourceSpec(_Body):
    name: str
    columns: list[ColumnSpec] = Field(alias="schema")


class PhysicalSourceSpec(_Body):
    logical_source: str
    type: str = Field(description="Connector type, e.g. File, TCP, Generator.")
    config: dict[str, Any] = Field(default_factory=dict)
    worker: str | None = Field(default=None, description="Pin the source to this worker.")


class SinkSpec(_Body):
    name: str
    columns: list[ColumnSpec] = Field(alias="schema")
    type: str = Field(description="Connector type, e.g. File, Print, Void, Checksum.")
    config: dict[str, Any] = Field(default_factory=dict)


class QuerySpec(_Body):
    statement: str = Field(description="SELECT ... INTO sink, in the NebulaStream dialect.")
    sink: str | None = Field(default=None, description="Must match the statement's INTO.")


class Health(BaseModel):
    status: str


class FieldProblem(BaseModel):
    """One field that did not validate: ``pointer`` into the body, or ``parameter`` ``in``
    the path, query or a header."""

    detail: str
    pointer: str | None = None
    parameter: str | None = None
    location: str | None = Field(default=None, alias="in")


class Problem(BaseModel):
    """An RFC 9457 problem; ``code`` is the stable error code."""

    type: str = Field(description="Always about:blank: ``code`` says which problem it is.")
    title: str = Field(description="The HTTP status phrase.")
    status: int
    detail: str = Field(description="What went wrong, readable.")
    code: str = Field(description="The coordinator's error code, or the gateway's own.")
    errors: list[FieldProblem] = Field(
        default_factory=list, description="The fields that did not validate (422 only)."
    )
