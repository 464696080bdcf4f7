"""Registering the coordinator's search attributes (:mod:`streamctl.workflows.web_ui`).

A workflow that upserts a search attribute its namespace does not know fails its workflow task,
again on every retry. So before the coordinator workflow starts, :func:`search_attributes_ready`
lists the namespace's custom attributes through the operator service and registers the missing
ones; the coordinator upserts only when this answered ``True``
(``CoordinatorConfig.search_attributes``). Where registering is not allowed (Temporal Cloud
registers attributes through its own API; a cluster may refuse the operator call) or an
attribute exists with another type, it answers ``False`` and logs why: the coordinator then
runs and answers as before, without search attributes.

The embedded dev server registers them at start (:func:`dev_server_arguments`), so there the
check finds them.
"""

from __future__ import annotations

import logging

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import (
    AddSearchAttributesRequest,
    ListSearchAttributesRequest,
)
from temporalio.client import Client
from temporalio.common import SearchAttributeIndexedValueType
from temporalio.service import RPCError

from streamctl.workflows.web_ui import SEARCH_ATTRIBUTES

log = logging.getLogger(__name__)


TYPE_NAMES = {
    SearchAttributeIndexedValueType.INT: "Int",
    SearchAttributeIndexedValueType.DOUBLE: "Double",
}
"""The dev server's names of the attributes' types."""


def dev_server_arguments() -> list[str]:
    """``temporal server start-dev`` arguments that register the attributes."""
    arguments: list[str] = []
    for key in SEARCH_ATTRIBUTES:
        arguments += ["--search-attribute", f"{key.name}={TYPE_NAMES[key.indexed_value_type]}"]
    return arguments


async def _registered(client: Client) -> dict[str, int]:
    listed = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=client.namespace)
    )
    return {name: int(kind) for name, kind in listed.custom_attributes.items()}


def _missing(registered: dict[str, int]) -> list[str]:
    return [key.name for key in SEARCH_ATTRIBUTES if key.name not in registered]


def _mistyped(registered: dict[str, int]) -> list[str]:
    return [
        key.name
        for key in SEARCH_ATTRIBUTES
        if key.name in registered and registered[key.name] != int(key.indexed_value_type)
    ]


async def search_attributes_ready(client: Client, *, register: bool = True) -> bool:
    """Whether the client's namespace has every coordinator search attribute with its type,
    registering the missing ones first when ``register``."""
    try:
        registered = await _registered(client)
        missing = _missing(registered)
        if missing and register:
            await client.operator_service.add_search_attributes(
                AddSearchAttributesRequest(
                    namespace=client.namespace,
                    search_attributes={
                        key.name: IndexedValueType.ValueType(int(key.indexed_value_type))
                        for key in SEARCH_ATTRIBUTES
                        if key.name in missing
                    },
                )
            )
            registered = await _registered(client)
            missing = _missing(registered)
    except RPCError as error:
        log.warning(
            "the coordinator runs without its search attributes: listing or registering them "
            "in namespace %s failed: %s",
            client.namespace,
            error,
        )
        return False
    mistyped = _mistyped(registered)
    if missing or mistyped:
        log.warning(
            "the coordinator runs without its search attributes in namespace %s: %s",
            client.namespace,
            "; ".join(
                part
                for part in (
                    f"not registered: {', '.join(missing)}" if missing else "",
                    f"registered with another type: {', '.join(mistyped)}" if mistyped else "",
                )
                if part
            ),
        )
        return False
    return True
