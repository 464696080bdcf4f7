"""Spark: what an agent runs. Plans translated to Spark, the connectors, and the agent's queries.

* ``translate`` a plan IR (:mod:`streamctl.planner.plan`) as a streaming DataFrame.
* ``types``     the Spark types that carry NES types.
* ``specs``     ``SourceSpec``/``SinkSpec``, what an agent is given to build a query (pure; the
  option table they normalize with is :mod:`streamctl.planner.options`).
* ``generator`` NebulaStream's generator source, row for row (pure; its options are parsed by
  :mod:`streamctl.planner.generator_schema`).
* ``sources``   ``read_source``: a streaming DataFrame per physical source (``source_relation``:
  the same before Spark analyses its parsing).
* ``sinks``     ``start_sink``: a streaming query writing into a sink (the readers that need no
  Spark are :mod:`streamctl.sink_files`; NES's text format is :mod:`streamctl.nes_text`).
* ``queries``   ``SparkQueries``: the Spark queries of one agent, started, stopped and reported
  (the Temporal activities around it are :mod:`streamctl.agent.activities`).
* ``handle``    the agent's current Spark as its queries see it.
* ``listener``  Spark's query callbacks turned into the agent's events.

Importing this package imports no pyspark; the planner never imports it.
"""
