# The image of every process in docker-compose.yml that runs project code: the coordinator
# worker, the agents, the gateway, and the Spark master and workers. One image for the Spark
# nodes too, so executors running an agent's Python UDFs have the driver's Python, the same
# Spark (the PySpark wheel carries Spark's jars and `spark-class`) and the streamctl package.
#
# bookworm pinned: Debian 12 ships openjdk-17; Debian 13 (trixie, the newer base of
# python:3.11-slim) no longer does, and Spark 4 runs on 17 or 21.
FROM python:3.11-slim-bookworm

RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
    && rm -rf /var/lib/apt/lists/*

ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
COPY pyproject.toml README.md ./
COPY streamctl ./streamctl
RUN pip install . && streamctl --help > /dev/null

# /data is where docker-compose.yml mounts the shared volume; a new named volume takes this
# directory's owner, so every container (same uid) can write checkpoints and files there.
RUN useradd --create-home --uid 1000 streamctl \
    && mkdir -p /data \
    && chown streamctl:streamctl /data
USER streamctl
WORKDIR /data

CMD ["streamctl", "--help"]
