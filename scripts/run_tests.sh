#!/usr/bin/env bash
# `make test`: the whole suite in four lanes side by side, one pytest process each:
#   models    tests/e2e's MiniLM thresholds on the session's SST-2 teacher (fine-tuning, attacks,
#             compression), WNUT-17, the demo, the compression pipeline's page and the dashboard's
#             browser tests
#   science   tests/lightning_modules (but the MiniLM probing suites), tests/test_every_config.py
#             and the studies (tests/platform/test_studies.py)
#   pages     the MiniLM probing suites, the probing pipeline's page, the other pages that need no
#             teacher (PAGES), SQuAD, the delta-tuning thresholds and the comparison pages
#   platform  tests/platform (but the studies) and tests/security (mostly waits: servers, worker
#             subprocesses, a browser, a Slurm cluster)
# With three lanes the two cores were busy 149 % of the time (a clean clone of a1d1d92: 3,911 CPU-s in
# 43.6 min): every lane waits at times (subprocesses starting, servers, browsers), so a fourth lane
# fills the gaps. Every test process runs one intra-op thread (OMP_NUM_THREADS=1): a torch process
# with two OpenMP threads whose second thread is descheduled by another lane waits at every parallel
# region (measured on this machine under load: MiniLM fine-tuning 0.21 steps/s on two threads, 0.30
# on one). Stages that set their own thread counts (compress's latency measurement) still do.
# Each lane runs in its own cgroup (cgroup v1's cpu controller, where this user may write it: root
# on Linux; elsewhere the lanes run without): the kernel then splits the cores between lanes, not
# between processes. Without it the lane that runs one process at a time (models: a stage
# subprocess after another) got a sliver: every job a worker starts opens its own session, and with
# autogroup scheduling (sched_autogroup_enabled) each session is weighed like a whole lane. That
# lane, the longest in CPU and one process wide, gets twice the share of each other lane.
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
# Delta tuning (~6 min, no session teacher), the comparison pages, SQuAD and the MiniLM probing
# suites (~6 min each) run with the pages; the studies (the ASHA-against-grid run, ~5 min) with the
# science lane. With each lane in its own cgroup (below), a clean clone of 15e6674 took models 37.3
# min, science 24.6, pages 20.7 and platform 46+ (the studies and delta tuning in it): the platform
# lane's tail waited on its servers and workers at under half a core while the rest sat idle.
LATE=(tests/e2e/test_delta_tuning_minilm.py tests/e2e/test_comparison_browser.py tests/e2e/test_squad_minilm.py)
STUDIES=(tests/platform/test_studies.py)
PROBING=(tests/lightning_modules/test_probing_minilm.py)
IGNORED=$(printf -- '--ignore=%s ' "${PAGES[@]}" "${LATE[@]}")
names=(models science pages platform)
declare -A paths=(
  [models]="tests/e2e $IGNORED"
  [science]="tests/lightning_modules tests/test_every_config.py ${STUDIES[*]} $(printf -- '--ignore=%s ' "${PROBING[@]}")"
  [pages]="${PROBING[*]} ${PAGES[*]} ${LATE[*]}"
  [platform]="tests/platform tests/security $(printf -- '--ignore=%s ' "${STUDIES[@]}")"
)
declare -A logs pids codes
cpu_root=/sys/fs/cgroup/cpu
declare -A shares=([models]=2048 [science]=1024 [pages]=1024 [platform]=1024)
lane_cgroup() {  # the cgroup.procs file of lane $1, or nothing where cgroups cannot be written
  local dir="$cpu_root/ptmlab-tests/$1"
  [[ -d "$cpu_root" ]] && mkdir -p "$dir" 2>/dev/null && echo "${shares[$1]}" > "$dir/cpu.shares" 2>/dev/null \
    && echo "$dir/cgroup.procs"
}
run_lane() {  # run_lane NAME [pytest options]: the lane's pytest, in the lane's cgroup where there is one
  local name=$1 procs
  shift
  procs=$(lane_cgroup "$name")
  # shellcheck disable=SC2086 - the lane's paths are words
  ( [[ -n "$procs" ]] && echo "$BASHPID" > "$procs"
    exec "$PYTHON" -m pytest ${paths[$name]} --basetemp="$tmp/ptmlab-tests-$name" --durations=25 "$@" )
}
if [[ -n "$(lane_cgroup "${names[0]}")" ]]; then
  echo "lanes: one cgroup each ($cpu_root/ptmlab-tests), CPU shares: $(for n in "${names[@]}"; do printf '%s %s ' "$n" "${shares[$n]}"; done)"
else
  echo "lanes: no cgroup (cannot write $cpu_root): the kernel shares the cores between processes"
fi
# The first lane reports live; the others are printed after it.
for name in "${names[@]:1}"; do
  logs[$name]=$(mktemp "$tmp/ptmlab-tests-$name.XXXXXX.log")
  run_lane "$name" "$@" > "${logs[$name]}" 2>&1 &
  pids[$name]=$!
done
first=${names[0]}
echo "==================== lane $first: ${paths[$first]} ===================="
run_lane "$first" "$@"
codes[$first]=$?
for name in "${names[@]:1}"; do
  wait "${pids[$name]}"
  codes[$name]=$?
  echo
  echo "==================== lane $name: ${paths[$name]} (ran alongside) ===================="
  cat "${logs[$name]}"
  rm -f "${logs[$name]}"
done
for name in "${names[@]}"; do  # an empty lane cgroup goes; one a stray process still holds stays
  rmdir "$cpu_root/ptmlab-tests/$name" 2>/dev/null
done
rmdir "$cpu_root/ptmlab-tests" 2>/dev/null
status=0 all_empty=1
for name in "${names[@]}"; do
  echo "lane $name: exit ${codes[$name]}"
  # 5 = that lane had no test to run (a -m/-k selection): not a failure unless no lane had one
  [[ "${codes[$name]}" -eq 5 ]] || all_empty=0
  [[ "${codes[$name]}" -eq 0 || "${codes[$name]}" -eq 5 ]] || status=1
done
[[ "$all_empty" -eq 1 ]] && exit 5
exit "$status"
