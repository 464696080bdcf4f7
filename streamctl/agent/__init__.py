"""The Spark agent (rank 7 of DESIGN §7): one process, one SparkSession, one Temporal worker
on task queue ``agent.<name>``.

* :mod:`.process` the process: its session, heartbeats, registration and Temporal worker;
* :mod:`.spark_session` building the session (classic or Spark Connect) and its driver JVM;
* :mod:`.spark_watchdog` noticing a lost Spark and rebuilding it
(:mod:`streamctl.lifecycle.spark_states`);
* :mod:`.runs` the queries it runs: start, stop, report (``SparkQueries``);
* :mod:`.spark_handle`, :mod:`.attempt`, :mod:`.listener` what a run sees of Spark, the
  activity attempt it runs in, and Spark's callbacks turned into reports;
* :mod:`.activities` the Temporal activities, thin adapters over :mod:`.runs`;
* :mod:`.agent_metrics` its Prometheus series.

The agent compiles plans with :mod:`streamctl.spark` and reaches the coordinator through a
sender it is given (``CoordinatorLink``); it imports no frontend.
"""
