#!/usr/bin/env bash
# Makes (once) a Python virtual environment with confluent-kafka from PyPI for the independent
# reader, and prints its python. Usage: python_env.sh VENV_DIR
set -euo pipefail
readonly CONFLUENT_KAFKA_VERSION=2.16.1
venv=$1
mkdir -p "$(dirname "$venv")"
# Tests running at the same time share the environment: one of them makes it.
exec 9> "$venv.lock"
flock -w 600 9 || { echo "python_env: $venv.lock held for 600 s" >&2; exit 1; }
if ! "$venv/bin/python" -c "import confluent_kafka" 2>/dev/null; then
  echo "python_env: installing confluent-kafka $CONFLUENT_KAFKA_VERSION into $venv" >&2
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install --quiet --disable-pip-version-check \
    "confluent-kafka==$CONFLUENT_KAFKA_VERSION" >&2
fi
echo "$venv/bin/python"
