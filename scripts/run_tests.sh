#!/usr/bin/env bash
# `make test`: the whole suite in six lanes side by side, one pytest process each:
#   models    the MiniLM thresholds on the session's SST-2 teacher (attacks, compression, the
#             fine-tuning check); their runs start together once the teacher exists
#   demo      the rest of tests/e2e that needs no teacher: WNUT-17, the demo, the compression
#             pipeline's page and the dashboard's browser tests
#   science   tests/lightning_modules (but the MiniLM probing suites) and tests/test_every_config.py
#   pages     the MiniLM probing suites, the probing pipeline's page, the other pages that need no
#             teacher (PAGES) and SQuAD
#   platform  tests/platform and tests/security (mostly waits: servers, worker subprocesses, a browser,
#             a Slurm cluster) but the long job runs, and the comparison pages in a browser
#   jobs      the long runs through real workers: the ASHA study, the kill matrix, the fault and
#             reliability tests, and the delta-tuning thresholds
# Every lane waits at times (subprocesses starting, servers, browsers) and the two cores were idle a
# quarter of the time with four lanes, the last lanes (models, one job at a time; platform, mostly
# waiting) running alone for ten minutes: six lanes fill the gaps. Every test process runs one
# intra-op thread (OMP_NUM_THREADS=1): a torch process with two OpenMP threads whose second thread is
# descheduled by another lane waits at every parallel region (measured on this machine under load:
# MiniLM fine-tuning 0.21 steps/s on two threads, 0.30 on one). Stages that set their own thread
# counts (compress's latency measurement) still do.
# Each lane has its own temporary folder and ends with its 25 slowest tests (--durations), so every
# CI log carries the suite's profile (tests/README.md keeps the table); the exit status fails if any
# lane fails.
#   scripts/run_tests.sh [pytest options]          every lane
#   scripts/run_tests.sh tests/x.py [options]      given paths: one plain pytest run
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
for arg in "$@"; do  # a test path (file, folder, file::test) among the options
  if [[ "$arg" != -* && -e "${arg%%::*}" ]]; then exec "$PYTHON" -m pytest "$@"; fi
done
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
tmp=${TMPDIR:-/tmp}
# Dashboard pages in a browser that need no session teacher: the probing pipeline's page (a MiniLM
# pipeline through a worker), the chart component, the studies' Pareto pages, the robustness page,
# an attack job's page.
PAGES=(tests/e2e/test_probing_page.py tests/e2e/test_curve_charts.py
       tests/e2e/test_study_pareto_browser.py tests/e2e/test_robustness_browser.py tests/e2e/test_attack_job_browser.py)
TEACHER=(tests/e2e/test_attack_minilm.py tests/e2e/test_compression_minilm.py tests/e2e/test_sst2_minilm.py)
JOBS=(tests/platform/test_studies.py tests/platform/test_kill_matrix.py tests/platform/test_faults.py
      tests/platform/test_reliability.py tests/e2e/test_delta_tuning_minilm.py)
COMPARISON=(tests/e2e/test_comparison_browser.py)
SCIENCE_E2E=(tests/e2e/test_squad_minilm.py)
PROBING=(tests/lightning_modules/test_probing_minilm.py)
ignore() { printf -- '--ignore=%s ' "$@"; }
names=(models demo science pages platform jobs)
declare -A paths=(
  [models]="${TEACHER[*]}"
  [demo]="tests/e2e $(ignore "${TEACHER[@]}" "${PAGES[@]}" "${JOBS[@]}" "${COMPARISON[@]}" "${SCIENCE_E2E[@]}")"
  [science]="tests/lightning_modules tests/test_every_config.py $(ignore "${PROBING[@]}")"
  [pages]="${PROBING[*]} ${PAGES[*]} ${SCIENCE_E2E[*]}"
  [platform]="tests/platform tests/security ${COMPARISON[*]} $(ignore "${JOBS[@]}")"
  [jobs]="${JOBS[*]}"
)
declare -A logs pids codes
# Each lane runs in a session of its own (setsid). The kernel's autogroup scheduling (on here and
# on CI's machine) shares the CPU between sessions, and the worker and job processes the tests start
# have sessions of their own: with the lanes in make's one session, every job running got as much
# CPU as all six lanes' pytest processes together, and a test watching a job for a moment to act at
# (the kill matrix) missed it while the job ran. Ctrl-C reaches each lane's pytest (the trap).
trap 'kill -INT "${pids[@]}" 2>/dev/null; wait; exit 130' INT TERM
# The first lane reports live; the others are printed after it.
for name in "${names[@]:1}"; do
  logs[$name]=$(mktemp "$tmp/ptmlab-tests-$name.XXXXXX.log")
  # shellcheck disable=SC2086 - the lane's paths are words
  setsid -w "$PYTHON" -m pytest ${paths[$name]} --basetemp="$tmp/ptmlab-tests-$name" --durations=25 "$@" \
    > "${logs[$name]}" 2>&1 &
  pids[$name]=$!
done
first=${names[0]}
echo "==================== lane $first: ${paths[$first]} ===================="
# shellcheck disable=SC2086
setsid -w "$PYTHON" -m pytest ${paths[$first]} --basetemp="$tmp/ptmlab-tests-$first" --durations=25 "$@" &
pids[$first]=$!
wait "${pids[$first]}"
codes[$first]=$?
for name in "${names[@]:1}"; do
  wait "${pids[$name]}"
  codes[$name]=$?
  echo
  echo "==================== lane $name: ${paths[$name]} (ran alongside) ===================="
  cat "${logs[$name]}"
  rm -f "${logs[$name]}"
done
status=0 all_empty=1
for name in "${names[@]}"; do
  echo "lane $name: exit ${codes[$name]}"
  # 5 = that lane had no test to run (a -m/-k selection): not a failure unless no lane had one
  [[ "${codes[$name]}" -eq 5 ]] || all_empty=0
  [[ "${codes[$name]}" -eq 0 || "${codes[$name]}" -eq 5 ]] || status=1
done
[[ "$all_empty" -eq 1 ]] && exit 5
exit "$status"
