"""``python -m streamctl.cli``: the ``streamctl`` command (how the supervisor starts its
processes)."""

from streamctl.cli import main

main()
