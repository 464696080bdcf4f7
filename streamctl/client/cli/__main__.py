"""``python -m streamctl.client.cli``: the ``streamctl`` command (how the supervisor starts its
processes)."""

from streamctl.client.cli import main

main()
