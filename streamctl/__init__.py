"""streamctl: a stateful coordinator for continuous stream queries on Temporal and Spark."""

__version__ = "0.1.0"
