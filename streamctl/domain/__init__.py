"""The pass's domain logic: what each message does to the catalog, one module per stage and
entity. Temporal never appears here; :mod:`streamctl.activities` adapts it."""
