#!/usr/bin/env bash
# Builds streamctl/spark/jvm/streamctl-spark.jar from the Java sources next to it, against the
# installed PySpark's jars, for Java 17 and later. The jar is committed (agents need only a
# Java runtime, no compiler); it records the SHA-256 of its sources, and
# tests/connectors/test_jvm_jar.py fails when they no longer match: run this after editing a
# source.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
jars=$("$python" -c 'import pathlib, pyspark; print(pathlib.Path(pyspark.__file__).parent / "jars")')
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sources=(streamctl/spark/jvm/*.java)
javac --release 17 -nowarn -cp "$jars/*" -d "$work/classes" "${sources[@]}"
mkdir -p "$work/classes/META-INF"
"$python" -m streamctl.spark.jvm_functions --source-digest > "$work/classes/META-INF/streamctl-sources.sha256"
rm -f streamctl/spark/jvm/streamctl-spark.jar
jar --create --date=2026-01-01T00:00:00Z --file streamctl/spark/jvm/streamctl-spark.jar -C "$work/classes" .
echo "built streamctl/spark/jvm/streamctl-spark.jar"
