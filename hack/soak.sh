#!/usr/bin/env bash
# soak.sh SHARDKEEPER_BINARY SOAK_RUNS: runs the crash storm with SOAK_RUNS
# random seeds, and the control-plane faults, on the local control plane
# (SHARDKEEPER_BIN_DIR).
#
# The timeout bounds a hang, at 4 minutes a seed: one takes about 20 s.
# soakreport shows each test as it ends and, at the end, the whole output of
# every test that failed.
set -euo pipefail
cd "$(dirname "$0")/.."
binary=${1:?usage: soak.sh SHARDKEEPER_BINARY SOAK_RUNS}
runs=${2:?usage: soak.sh SHARDKEEPER_BINARY SOAK_RUNS}

seeds=
for _ in $(seq 1 "$runs"); do seeds+=$RANDOM$RANDOM,; done
seeds=${seeds%,}
echo "go test -tags e2e -run 'TestCrashDuringEditStorm|TestControlPlaneFaults' ./e2e/ with the seeds $seeds"
SHARDKEEPER_CRASH_SEEDS=$seeds SHARDKEEPER_BINARY=$binary \
  go test -tags e2e -count=1 -timeout "$((10 + 4 * runs))m" -json \
  -run 'TestCrashDuringEditStorm|TestControlPlaneFaults' ./e2e/ 2>&1 | go run ./e2e/cmd/soakreport
