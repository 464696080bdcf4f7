"""``streamctl systest`` (rank 9 of DESIGN §7): NebulaStream system-test files (``.test``) run
through the coordinator on Spark, each file in a namespace of its own, results compared with
the file's expectation.

* :mod:`.suite_files` reading the files (``SYSTEST-DSL.md`` of NebulaStream's suite);
* :mod:`.namespace` a run's names, made unique; :mod:`.runner` running the statements and
  queries; :mod:`.compare` comparing rows; :mod:`.progress` the command's output.
"""
