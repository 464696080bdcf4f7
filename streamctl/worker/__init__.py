"""Process entry points of the coordinator side (rank 9 of DESIGN §7): the coordinator worker,
the embedded stack's supervisor (``streamctl up``), the Temporal dev server it starts, the
worker's metrics and its guard against stuck runs."""
