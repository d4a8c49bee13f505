#!/usr/bin/env bash
# Installs the Debian packages the test suite runs for real (PostgreSQL server, Chromium, a Slurm
# cluster with munge, WordNet), only
# when they are missing. Needs root (CI and the dev machines run as root); otherwise says what to run.
set -euo pipefail
need=()
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
[ -x /usr/bin/chromium ] || need+=(chromium chromium-driver)
command -v slurmctld >/dev/null 2>&1 && command -v slurmd >/dev/null 2>&1 && command -v munged >/dev/null 2>&1 \
  || need+=(slurm-wlm munge)
[ -f /usr/share/wordnet/index.noun ] || need+=(wordnet-base)  # WordNet 3.0 for the pwws attack recipe
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "missing system packages: ${need[*]} (run: sudo apt-get install -y ${need[*]})" >&2
  exit 0
fi
echo "installing system packages: ${need[*]}"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
