"""Statements to plans (rank 2 of DESIGN §7), pure: NebulaStream text parsed (:mod:`.parser`,
``grammar.lark``), bound against the catalog's names and typed (:mod:`.binder`), planned
(:mod:`.plan`) and placed (:mod:`.placement`). No Spark and no Temporal here: the Spark
translation is :mod:`streamctl.spark`."""
