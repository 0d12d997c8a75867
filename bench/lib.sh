# Sourced by the benchmark scripts. run_as_user_and_root PROG ARGS... runs
# PROG ARGS... -label LABEL: as the calling user when that is not root;
# as root, first as the unprivileged user CELLBOX_BENCH_USER (default:
# cellboxtest, if it exists), whose figures are the ones that count, with a
# clean environment and from /, then as root for reference.
run_as_user_and_root() {
	if [[ $(id -u) != 0 ]]; then
		"$@" -label "as $(id -un)"
		return
	fi
	local user=${CELLBOX_BENCH_USER:-}
	if [[ -z $user ]] && id cellboxtest >/dev/null 2>&1; then
		user=cellboxtest
	fi
	if [[ -n $user ]]; then
		local env=(env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/tmp TMPDIR=/tmp LANG=C.UTF-8)
		local as_user
		if command -v runuser >/dev/null; then
			as_user=(runuser -u "$user" --)
		else
			as_user=(setpriv --reuid="$user" --regid="$user" --init-groups --)
		fi
		(cd / && "${as_user[@]}" "${env[@]}" "$@" -label "as $user, unprivileged (the figures that count)")
	else
		echo "== no unprivileged user: set CELLBOX_BENCH_USER (or create cellboxtest) to measure as one"
	fi
	echo
	"$@" -label "as root, for reference"
}
