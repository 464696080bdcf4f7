"""Thin Temporal adapters the coordinator workflow runs by reference (rank 4 of DESIGN §7):
the pass activity over :mod:`streamctl.domain`, and a request to the coordinator for a
schedule. The agent's activities live with the agent (:mod:`streamctl.agent.activities`)."""
