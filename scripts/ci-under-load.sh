#!/usr/bin/env bash
# Runs a command (default: `pnpm test`) N times while a CPU load keeps both cores busy, and
# prints how many runs passed. The proof that no test depends on how fast the machine is.
#
#   scripts/ci-under-load.sh [runs] [-- command...]
#   scripts/ci-under-load.sh 5                   # pnpm test, 5 times, under load
#   scripts/ci-under-load.sh 3 -- bash .ci/run   # the whole CI, 3 times
#
# The load is `stress-ng --cpu N` when stress-ng is installed (Debian: apt-get install
# stress-ng), else N busy-looping node processes; N = the number of cores (LOAD_WORKERS).
# Logs of each run: $LOAD_LOGS (default: a temporary folder, printed at the end).
set -uo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
shift || true
[ "${1:-}" = "--" ] && shift
if [ $# -eq 0 ]; then set -- pnpm test; fi
workers=${LOAD_WORKERS:-$(nproc)}
logs=${LOAD_LOGS:-$(mktemp -d)}
mkdir -p "$logs"

load_pids=()
start_load() {
  if command -v stress-ng >/dev/null 2>&1; then
    stress-ng --cpu "$workers" --quiet >/dev/null 2>&1 &
    load_pids+=($!)
  else
    for _ in $(seq 1 "$workers"); do
      node -e 'for (;;) {}' &
      load_pids+=($!)
    done
  fi
}
stop_load() {
  for pid in "${load_pids[@]}"; do kill "$pid" 2>/dev/null; done
  wait "${load_pids[@]}" 2>/dev/null
  load_pids=()
}
trap stop_load EXIT INT TERM

start_load
echo "load: ${workers} CPU workers ($(command -v stress-ng >/dev/null && echo stress-ng || echo node busy loops)); load average $(cut -d' ' -f1-3 /proc/loadavg)"
passed=0
for i in $(seq 1 "$runs"); do
  started=$(date +%s)
  if "$@" >"$logs/run-$i.log" 2>&1; then
    passed=$((passed + 1)); verdict=passed
  else
    verdict=FAILED
  fi
  echo "run $i/$runs: $verdict in $(($(date +%s) - started)) s (load average $(cut -d' ' -f1-3 /proc/loadavg)); log $logs/run-$i.log"
  if [ "$verdict" = FAILED ]; then
    sed 's/\x1b\[[0-9;]*m//g' "$logs/run-$i.log" | grep -E '(FAIL|✗|×|AssertionError|Error:)' | head -20 | sed 's/^/    /'
  fi
done
echo "passed $passed of $runs under load"
[ "$passed" = "$runs" ]
