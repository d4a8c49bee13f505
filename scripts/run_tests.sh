#!/usr/bin/env bash
# `make test`: the whole suite in two halves side by side. tests/platform mostly waits (servers,
# worker subprocesses, a browser, a Slurm cluster) while the rest mostly computes (training,
# extraction, measurement): running them together uses the cores the waiting half leaves idle.
# Each half has its own temporary folder; the platform half's report follows the other's; the
# exit status fails if either half fails.
#   scripts/run_tests.sh [pytest options]          both halves
#   scripts/run_tests.sh tests/x.py [options]      given paths: one plain pytest run
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
for arg in "$@"; do  # a test path (file, folder, file::test) among the options
  if [[ "$arg" != -* && -e "${arg%%::*}" ]]; then exec "$PYTHON" -m pytest "$@"; fi
done
tmp=${TMPDIR:-/tmp}
platform_log=$(mktemp "$tmp/ptmlab-platform-tests.XXXXXX.log")
"$PYTHON" -m pytest tests/platform --basetemp="$tmp/ptmlab-tests-platform" "$@" > "$platform_log" 2>&1 &
platform_pid=$!
"$PYTHON" -m pytest tests --ignore=tests/platform --basetemp="$tmp/ptmlab-tests-rest" "$@"
rest=$?
wait "$platform_pid"
platform=$?
echo
echo "==================== tests/platform (ran alongside the above) ===================="
cat "$platform_log"
rm -f "$platform_log"
echo "tests/platform: exit $platform; the rest: exit $rest"
# 5 = that half had no test to run (a -k selection): not a failure unless neither had one
if [ "$rest" -eq 5 ] && [ "$platform" -eq 5 ]; then exit 5; fi
[[ "$rest" -eq 0 || "$rest" -eq 5 ]] && [[ "$platform" -eq 0 || "$platform" -eq 5 ]]
