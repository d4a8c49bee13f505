#!/usr/bin/env bash
# `make test`: the whole suite in four lanes side by side, one pytest process each:
#   models    tests/e2e's MiniLM thresholds on the session's SST-2 teacher (fine-tuning, attacks,
#             compression), WNUT-17, the demo, the compression pipeline's page and the dashboard's
#             browser tests
#   science   tests/lightning_modules (but the MiniLM probing suites) and tests/test_every_config.py
#   pages     the MiniLM probing suites, the probing pipeline's page, the other pages that need no
#             teacher (PAGES) and SQuAD
#   platform  tests/platform and tests/security (mostly waits: servers, worker subprocesses, a browser,
#             a Slurm cluster), the comparison pages in a browser, and the delta-tuning thresholds
# With three lanes the two cores were busy 149 % of the time (a clean clone of a1d1d92: 3,911 CPU-s in
# 43.6 min): every lane waits at times (subprocesses starting, servers, browsers), so a fourth lane
# fills the gaps. Every test process runs one intra-op thread (OMP_NUM_THREADS=1): a torch process
# with two OpenMP threads whose second thread is descheduled by another lane waits at every parallel
# region (measured on this machine under load: MiniLM fine-tuning 0.21 steps/s on two threads, 0.30
# on one). Stages that set their own thread counts (compress's latency measurement) still do.
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
# an attack job's page. The compression pipeline's page runs in the models lane (its fixture ~2 min).
PAGES=(tests/e2e/test_probing_page.py tests/e2e/test_curve_charts.py
       tests/e2e/test_study_pareto_browser.py tests/e2e/test_robustness_browser.py tests/e2e/test_attack_job_browser.py)
# Delta tuning (~6 min) needs no session teacher and the comparison pages mostly wait: both in the
# lane that mostly waits. SQuAD and the MiniLM probing suites (~6 min each) run with the pages.
# Clean clones: with the demo and WNUT-17 here too (and SQuAD at twice its cost, timing out) models
# 41.1 min, science 30.1, pages 28.9, platform 39.5, 42.9 in all; with the demo and WNUT-17 moved
# to the pages lane and delta tuning to science, the models lane (the teacher's compression and
# attack fixtures, one process) was starved: 45+ min.
WAITING=(tests/e2e/test_delta_tuning_minilm.py tests/e2e/test_comparison_browser.py)
SCIENCE_E2E=(tests/e2e/test_squad_minilm.py)
PROBING=(tests/lightning_modules/test_probing_minilm.py)
IGNORED=$(printf -- '--ignore=%s ' "${PAGES[@]}" "${WAITING[@]}" "${SCIENCE_E2E[@]}")
names=(models science pages platform)
declare -A paths=(
  [models]="tests/e2e $IGNORED"
  [science]="tests/lightning_modules tests/test_every_config.py $(printf -- '--ignore=%s ' "${PROBING[@]}")"
  [pages]="${PROBING[*]} ${PAGES[*]} ${SCIENCE_E2E[*]}"
  [platform]="tests/platform tests/security ${WAITING[*]}"
)
declare -A logs pids codes
# The first lane reports live; the others are printed after it.
for name in "${names[@]:1}"; do
  logs[$name]=$(mktemp "$tmp/ptmlab-tests-$name.XXXXXX.log")
  # shellcheck disable=SC2086 - the lane's paths are words
  "$PYTHON" -m pytest ${paths[$name]} --basetemp="$tmp/ptmlab-tests-$name" --durations=25 "$@" \
    > "${logs[$name]}" 2>&1 &
  pids[$name]=$!
done
first=${names[0]}
echo "==================== lane $first: ${paths[$first]} ===================="
# shellcheck disable=SC2086
"$PYTHON" -m pytest ${paths[$first]} --basetemp="$tmp/ptmlab-tests-$first" --durations=25 "$@"
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
