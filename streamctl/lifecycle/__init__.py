"""Lifecycles of the coordinator's entities as explicit state machines."""
