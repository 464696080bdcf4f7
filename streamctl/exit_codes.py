"""The exit statuses of every ``streamctl`` command, one meaning each (scripts rely on them)."""

from __future__ import annotations

from typing import Final

EXIT_OK: Final = 0
EXIT_REFUSED: Final = 1
"""A request failed (the coordinator answered an error), or a benchmark missed its mark."""
EXIT_USAGE: Final = 2
"""Bad usage: an option, a file or a statement the command cannot take."""
EXIT_UNREACHABLE: Final = 3
"""The stack (Temporal, the coordinator) is not reachable."""
