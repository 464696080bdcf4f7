"""``streamctl bench ...`` (rank 9 of DESIGN §7): benchmarks that print their figures as JSON,
each against its baseline in the same run, on a private stack they start and stop."""
