"""Activities that send a request to the coordinator workflow from inside Temporal.

The reoptimization workflow cannot send an update itself (workflows only signal other
workflows, and a signal has no answer), so this activity does, through the worker's own
Temporal client, in the coordinator's wire format (:mod:`streamctl.workflows.coordinator`):
one ``submit`` update carrying one request envelope under the id the caller chose. A retry
with the same id gets the coordinator's stored answer, so the request is applied once; an
answer to ask again for (:data:`~streamctl.error_codes.ASK_AGAIN`) fails the attempt, and the
activity's retry asks again.
"""

from __future__ import annotations

from typing import Any

import orjson
from temporalio import activity
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError

from streamctl.compact_json import dumps_bytes
from streamctl.error_codes import asks_again
from streamctl.protocol import messages as m
from streamctl.protocol import refusals
from streamctl.protocol.coordinator_config import ReoptimizeTarget
from streamctl.raw_payloads import json_payload


async def _ask(workflow_id: str, request: m.Request, request_id: str) -> Any:
    handle = activity.client().get_workflow_handle(workflow_id)
    envelope = request.to_envelope(request_id)
    answer: RawValue = await handle.execute_update(
        "submit",
        args=[[request_id], json_payload(b"[" + dumps_bytes(envelope) + b"]")],
        # An update per attempt: Temporal answers a known update id with its first answer,
        # and an attempt after an "ask again" must reach a pass again.
        id=f"u-{request_id}-{activity.info().attempt}",
        result_type=RawValue,
    )
    [response] = orjson.loads(answer.payload.data)
    if asks_again(response.get("error_code"), response.get("error_message")):
        # Its pass could not answer it then; the activity's retry asks again under the id.
        raise ApplicationError(
            f"{request.kind}: {response['error_message']}", type=refusals.ASK_AGAIN
        )
    if not response["ok"]:
        raise ApplicationError(
            f"{request.kind} refused: {response['error_code']}: {response['error_message']}",
            type=refusals.REQUEST_REFUSED,
            non_retryable=True,
        )
    return response["result"]


@activity.defn(name="request_reoptimize")
async def request_reoptimize(target: ReoptimizeTarget) -> Any:
    return await _ask(target.coordinator_workflow_id, m.Reoptimize(), target.request_id)
