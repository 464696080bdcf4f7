"""The REST gateway (``streamctl gateway``): the coordinator's requests and statements over HTTP.

Protocol
--------
A FastAPI application; the OpenAPI document is served at ``/openapi.json`` and rendered at
``/docs``. Every route under ``/v1`` turns one HTTP call into one typed request of
:mod:`streamctl.protocol.messages` and answers the coordinator's result as JSON:

=======================================  ======================================  ============
route                                    request                                 success
=======================================  ======================================  ============
``POST /v1/statements`` ``{"text"}``     ``ExecuteStatement``                    200
``POST /v1/logical-sources``             ``CreateLogicalSource``                 201
``GET /v1/logical-sources[/{name}]``     ``ListLogicalSources``/``Get...``       200
``DELETE /v1/logical-sources/{name}``    ``DropLogicalSource`` (``?cascade``)    200
``POST /v1/physical-sources``            ``CreatePhysicalSource``                201
``GET /v1/physical-sources[/{id}]``      ``ListPhysicalSources`` (``?logical_source``)/``Get``
``DELETE /v1/physical-sources/{id}``     ``DropPhysicalSource`` (``?cascade``)   200
``POST /v1/sinks``, ``GET``, ``DELETE``  ``CreateSink``, ``List/GetSink``, ``DropSink``
``POST /v1/queries`` ``{"statement"}``   ``CreateQuery``                         201
``GET /v1/queries[/{id}]``               ``ListQueries``/``GetQuery``            200
``POST /v1/queries/{id}/start|stop``     ``StartQuery``/``StopQuery``            200
``DELETE /v1/queries/{id}``              ``DropQuery``                           200
``GET /v1/workers[/{name}]``             ``ListWorkers``/``GetWorker``           200
``GET /healthz``                         none: the gateway process is up         200
=======================================  ======================================  ============

A create answers ``201 Created`` with a ``Location`` header naming the new item.

A listing (``GET`` of a collection) answers every item, or with ``?limit=N`` one page of at
most ``N`` items in key order and, while more follow, a ``Link: <...&after=KEY>; rel="next"``
header naming the next page (the key of the page's last item is the cursor).
``POST /v1/statements`` takes ``limit`` (and ``after``) the same way for a text that is one
``SHOW``: it answers a page and ``next``, the cursor to post as ``after`` with the same text.

Auth
----
Every route except ``/healthz`` and the OpenAPI document (``/openapi.json``, ``/docs``) needs
``Authorization: Bearer <token>``, the token given by ``--token`` or
``STREAMCTL_GATEWAY_TOKEN``. The check runs before routing and before the body is read, so a
caller without the token learns nothing (not even which routes exist): a missing or wrong token
is ``401`` with ``WWW-Authenticate: Bearer``. Without a token the gateway refuses to start,
unless ``--insecure-no-auth`` is given, and then it listens on a loopback address only.

Errors
------
Every error is an RFC 9457 problem, ``Content-Type: application/problem+json``::

    {"type": "about:blank", "title": "Not Found", "status": 404,
     "detail": "sink 'out' does not exist", "code": "NOT_FOUND"}

``code`` is what clients switch on: the coordinator's error code
(``streamctl.client.coordinator_errors``)
for refusals, ``INVALID_REQUEST`` for a body or parameter that does not validate (with
``errors``: one entry per field, a JSON pointer into the body or the parameter's name),
``UNAUTHORIZED``, ``COORDINATOR_UNAVAILABLE`` (503: Temporal or the coordinator workflow did
not answer in time), ``INTERNAL`` (500) and the HTTP status name for routing errors
(``NOT_FOUND``, ``METHOD_NOT_ALLOWED``). Coordinator codes map onto statuses by
:data:`~streamctl.gateway.problems.STATUS_OF_CODE`; any code not listed there
(invalid names, schemas, statements and the planner's codes) is 422.

Guarantees
----------
* The gateway only formulates messages: it never opens the catalog, never parses statements
  and checks only the JSON shape of a body. Whatever the coordinator checks (names, types,
  connector options, statements) it refuses with its own code, which the problem carries.
* One :class:`~streamctl.client.client.CoordinatorClient` per gateway process, connected at
  startup and closed at shutdown, so concurrent HTTP calls are coalesced into few Temporal
  updates exactly like any other client's; a request id is never reused, so an HTTP call is
  applied at most once.
* The response models are the coordinator's answer shapes, declared once in
  :mod:`streamctl.protocol.answers`; result fields the coordinator adds later pass through
  (those classes allow extra fields), the documented ones are always there.

Modules
-------
:mod:`~streamctl.gateway.bodies` the request bodies and the problem shape (the response
bodies are :mod:`streamctl.protocol.answers`) · :mod:`~streamctl.gateway.problems`
errors as RFC 9457 problems · :mod:`~streamctl.gateway.auth` the bearer token ·
:mod:`~streamctl.gateway.routes` the ``/v1`` routes · :mod:`~streamctl.gateway.app`
the application, its settings and :func:`~streamctl.gateway.app.serve`.
"""
