"""Statement parsing, binding, translation to Spark and placement (issue 3)."""
