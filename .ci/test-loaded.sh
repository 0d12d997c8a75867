#!/usr/bin/env bash
# make test, RUNS times in a row (3 by default), while a CPU burner spins on
# every core: the suite must pass on a loaded machine, where goroutines and
# processes are scheduled late. Stops at the first failure; prints each
# run's time. The burners end with this script.
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${RUNS:-3}"
burners=()
cleanup() { for p in "${burners[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
for _ in $(seq "$(nproc)"); do
	(while :; do :; done) &
	burners+=("$!")
done
echo "== $(nproc) CPU burners running; make test $runs times"
for i in $(seq "$runs"); do
	start=$(date +%s)
	if ! make test; then
		echo "== run $i of $runs FAILED after $(( $(date +%s) - start )) s"
		exit 1
	fi
	echo "== run $i of $runs passed in $(( $(date +%s) - start )) s"
done
echo "$runs passed, 0 failed"
