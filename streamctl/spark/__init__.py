"""The compiler from a plan to Spark (rank 6 of DESIGN §7): plans translated to streaming
DataFrames, and the connectors. It runs inside the agent and imports nothing of it.

* ``translate``   a plan IR (:mod:`streamctl.planner.plan`) as a streaming DataFrame.
* ``spark_types`` the Spark types that carry NES types.
* ``specs``       ``SourceSpec``/``SinkSpec``, what an agent is given to build a query (pure;
  the option table they normalize with is :mod:`streamctl.planner.options`).
* ``generator``   NebulaStream's generator source, row for row (pure; its options are parsed
  by :mod:`streamctl.planner.generator_schema`).
* ``source_readers`` ``read_source``: a streaming DataFrame per physical source
  (``source_relation``: the same before Spark analyses its parsing).
* ``sink_writers`` ``start_sink``: a streaming query writing into a sink (the readers that
  need no Spark are :mod:`streamctl.sink_files`; NES's text format is
  :mod:`streamctl.nes_text`).
* ``assignments`` an agent's assignment as DataFrames; ``session_kind`` classic or Spark
  Connect.

The agent's runs of these queries (start, stop, report) are :mod:`streamctl.agent.runs`.
Importing this package imports no pyspark; the planner never imports it.
"""
