"""Source and sink connectors: NES connector options and their Spark implementations.

* ``options``   the one table of connector options (pure Python; the coordinator validates
  ``CREATE PHYSICAL SOURCE``/``CREATE SINK`` options with it inside its catalog transaction).
* ``specs``     ``SourceSpec``/``SinkSpec``, what an agent is given to build a query (pure).
* ``generator`` NebulaStream's generator source, row for row (pure).
* ``nes_text``  NebulaStream's CSV text format: value parsing and formatting (pure).
* ``sources``   ``read_source``: a streaming DataFrame per physical source (imports pyspark).
* ``sinks``     ``start_sink``: a streaming query writing into a sink (imports pyspark).

Importing this package imports no pyspark.
"""
