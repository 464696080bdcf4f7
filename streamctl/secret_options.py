"""Which option names carry credentials, and masking them where text is shown (a leaf: imports
nothing from streamctl).

Every package may import this: the connector option table
(:mod:`streamctl.planner.options`) refuses Kafka pass-through keys named by a secret word, the
wire codec (:mod:`streamctl.workflows.payload_crypto`) encrypts payloads that mention one, and
frontends, the domain and the supervisor mask what they show with :func:`redact_statement` and
:func:`redact_url`. The option table marks each secret option (``OptionSpec.secret``); its
names hold a word of :data:`SECRET_WORDS` or are one of :data:`URL_SECRET_OPTIONS`
(``tests/connectors/test_connector_options.py`` checks the table against both).
"""

from __future__ import annotations

import re
from typing import Final

__all__ = [
    "SECRET_WORDS",
    "URL_SECRET_OPTIONS",
    "redact_statement",
    "redact_url",
]

SECRET_WORDS: Final = (
    "password",
    "passwd",
    "secret",
    "jaas",
    "token",
    "credential",
    "api_key",
    "apikey",
    "private_key",
    "conninfo",
)
"""Words that mark an option name as a credential (lower case). Kafka pass-through keys with
one are refused, and the wire codec encrypts any payload that mentions one
(``streamctl.workflows.payload_crypto``); every secret option's names contain one, except
``url``, whose credentials are a URL's user info or a ``password`` parameter."""

URL_SECRET_OPTIONS: Final = ("connection_url", "url")
"""Names (lower case, sorted) of the secret options whose names hold no word of
:data:`SECRET_WORDS`: a PostgreSQL sink's ``url`` (NES: ``CONNECTION_URL``), whose credentials
are a URL's user info or a ``password=`` parameter of its value."""


# --- statement text ------------------------------------------------------------------------

_KEY_PART = r"(?:`[^`]*`|[A-Za-z0-9_$]+)"
_OPTION_VALUE = re.compile(
    rf"(?P<value>'(?:[^']|'')*'|[-+]?[0-9][0-9A-Za-z_.]*)(?P<as>\s+AS\s+)"
    rf"(?P<key>{_KEY_PART}(?:\s*\.\s*{_KEY_PART})*)",
    re.IGNORECASE,
)
_URL_USERINFO: Final = re.compile(r"(://)[^/@\s'\"`,;]+@")


def _names_secret(key: str) -> bool:
    bare = key.replace("`", "").replace(" ", "")
    return bare.rpartition(".")[2].lower() in URL_SECRET_OPTIONS or any(
        word in bare.lower() for word in SECRET_WORDS
    )


def redact_statement(text: str) -> str:
    """A statement with the values of secret options (``'hunter2' AS `SINK`.PASSWORD``) and
    the user info of URLs replaced by ``***``, for answers that echo statement text."""
    masked = _OPTION_VALUE.sub(
        lambda match: (
            f"'***'{match['as']}{match['key']}" if _names_secret(match["key"]) else match[0]
        ),
        text,
    )
    return _URL_USERINFO.sub(r"\1***@", masked)


# --- URLs ----------------------------------------------------------------------------------

_PASSWORD_PARAMETER = re.compile(r"(?i)\b(password\s*=\s*)('(?:[^'\\]|\\.)*'|[^&\s]*)")
"""A ``password=`` query parameter (``?password=x``) or libpq conninfo pair (``password='x'``)."""


def redact_url(url: str) -> str:
    """``url`` with its password replaced by ``***`` (``postgresql://user:***@host/db``), in
    the user info and in ``password=`` parameters; the user, host and database stay readable.

    The user info ends at the last ``@``: a password may hold ``@``, ``/`` or ``:`` (libpq
    takes some unencoded), so anything up to there could be part of it.

    A catalog URL may carry a password. Whatever shows a URL to people or writes it where
    others may read it (output, logs, ``stack.json``) shows this instead.
    """
    scheme, separator, rest = url.partition("://")
    if separator and "@" in rest and not rest.startswith("/"):  # sqlite:///path has no user
        userinfo, _, location = rest.rpartition("@")
        user, colon, _password = userinfo.partition(":")
        if colon:
            url = f"{scheme}://{user}:***@{location}"
    return _PASSWORD_PARAMETER.sub(r"\1***", url)
