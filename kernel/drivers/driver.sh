# cellbox's bash kernel driver (kernel/drivers/README.md is the contract).
#
# Run as `bash -c SRC`: fd 3 brings requests (NUL-terminated fields), fd 4
# takes events (JSON lines). A cell runs at top level with `.` (not inside a
# function), so `declare x`, `declare -A m`, functions, aliases, exports and
# `cd` persist from one cell to the next.
#
# Everything of the driver is named __cb_*, locals included: a local shadows
# the user's variable of the same name, and `compgen -v` would list it.
#
# Interrupt: the INT trap (and, under `set -e`, the ERR trap) turns on
# extdebug and a DEBUG trap that refuses every further command of the cell:
# returning 2 unwinds the running functions and the sourced cell, until the
# driver's __cb_end runs. A fatal error (an unset ${x:?}) ends a
# non-interactive bash: the EXIT trap then starts the driver again in the
# same process with the user's state (__cb_exit).

if [[ -n ${__CB_STATE-} ]]; then
	# A fatal error restarted the driver (see __cb_exit).
	__cb_tmp=$__CB_STATE __cb_lost=$__CB_ID __cb_lostcell=${__CB_CELL:-bash}
	unset __CB_STATE __CB_ID __CB_CELL
else
	# Its files go to a tmpfs if it can: rewriting a file on ext4 can cost
	# milliseconds (auto_da_alloc).
	__cb_tmp=/dev/shm
	[[ -d $__cb_tmp && -w $__cb_tmp ]] || __cb_tmp=${TMPDIR:-/tmp}
	__cb_tmp=$(mktemp -d "$__cb_tmp/cellbox-bash.XXXXXX" 3<&- 4>&-) || exit 1
	mkdir "$__cb_tmp/src" 3<&- 4>&- || exit 1
	# The shell's own variables, not shown as the user's.
	compgen -v >"$__cb_tmp/shellvars"
fi
declare -A __cb_shell=([BASH_REMATCH]=1 [FUNCNAME]=1 [OPTARG]=1 [COLUMNS]=1 [LINES]=1 [MAILCHECK]=1)
while IFS= read -r __cb_n; do __cb_shell[$__cb_n]=1; done <"$__cb_tmp/shellvars"

# JSON escapes of the C0 controls other than \n \t \r.
declare -A __cb_c0=()
for __cb_n in {1..31}; do
	((__cb_n == 9 || __cb_n == 10 || __cb_n == 13)) && continue
	printf -v __cb_h '%02x' "$__cb_n"
	printf -v __cb_c "\\x$__cb_h"
	__cb_c0[$__cb_c]="\\u00$__cb_h"
done

__cb_rqfd=10 __cb_evfd=11 # where the main loop's `3<&- 4>&-` puts fds 3 and 4
__cb_busy= __cb_opts=hB __cb_ropts= __cb_id= __cb_file= __cb_skipon= __cb_intr= __cb_erec= __cb_esrc=
shopt -s expand_aliases # aliases defined in a cell work in its later lines and cells

# __cb_q STR: __cb_j = STR as a JSON string. Bytes that are not UTF-8 pass
# as they are (the manager's JSON decoder makes them U+FFFD).
__cb_q() {
	local __cb_s=$1 __cb_k
	__cb_s=${__cb_s//\\/\\\\}
	__cb_s=${__cb_s//\"/\\\"}
	if [[ $__cb_s == *[[:cntrl:]]* ]]; then
		__cb_s=${__cb_s//$'\n'/\\n}
		__cb_s=${__cb_s//$'\t'/\\t}
		__cb_s=${__cb_s//$'\r'/\\r}
		if [[ $__cb_s == *[[:cntrl:]]* ]]; then
			for __cb_k in "${!__cb_c0[@]}"; do
				[[ $__cb_s != *"$__cb_k"* ]] || __cb_s=${__cb_s//"$__cb_k"/"${__cb_c0[$__cb_k]}"}
			done
		fi
	fi
	__cb_j=\"$__cb_s\"
}

# __cb_qa STR...: __cb_j = the STRs as a JSON array.
__cb_qa() {
	(($#)) || { __cb_j='[]'; return 0; }
	local -a __cb_a=("$@")
	local IFS=' ' __cb_i
	if [[ ${__cb_a[*]} == *[[:cntrl:]]* ]]; then
		for __cb_i in "${!__cb_a[@]}"; do
			__cb_q "${__cb_a[__cb_i]}"
			__cb_a[__cb_i]=${__cb_j:1:-1}
		done
	else
		__cb_a=("${__cb_a[@]//\\/\\\\}")
		__cb_a=("${__cb_a[@]//\"/\\\"}")
	fi
	printf -v __cb_j '"%s",' "${__cb_a[@]}"
	__cb_j="[${__cb_j%,}]"
}

# __cb_send JSON: write one event.
__cb_send() { builtin printf '%s\n' "$1" >&"$__cb_evfd"; }

# __cb_reply ID RESULT-JSON
__cb_reply() {
	__cb_q "$1"
	__cb_send "{\"ev\":\"reply\",\"id\":$__cb_j,\"result\":$2}"
}

# __cb_recv NAME...: read the next request's fields into the NAMEs. At end
# of file (the manager is gone) the driver exits. During a cell (waiting for
# an input answer) it polls, since bash's read goes on reading after a trap:
# an interrupt then abandons a request not yet begun (fails).
__cb_recv() {
	local TMOUT= __cb_v __cb_p __cb_acc __cb_t=() __cb_rs
	[[ -z $__cb_busy ]] || __cb_t=(-t 0.05)
	for __cb_v; do
		__cb_acc=
		while :; do
			__cb_rs=0
			IFS= builtin read -r -d '' "${__cb_t[@]}" -u "$__cb_rqfd" __cb_p || __cb_rs=$?
			__cb_acc+=$__cb_p
			((__cb_rs != 0)) || break
			((__cb_rs > 128)) || exit 0
			[[ -z $__cb_intr || -n $__cb_acc || $__cb_v != "$1" ]] || return 1
		done
		printf -v "$__cb_v" '%s' "$__cb_acc"
	done
}

# __cb_next: answer requests until an execute arrives; its fields are left in
# __cb_id __cb_code __cb_stdin __cb_flags __cb_count __cb_spath __cb_sline.
__cb_next() {
	local __cb_st=$?
	# A `break` or `continue` in the cell skipped __cb_end: end the cell now.
	[[ -z $__cb_busy ]] || __cb_end "$__cb_st"
	while :; do
		__cb_recv __cb_op __cb_rid
		if [[ $__cb_op == execute ]]; then
			__cb_id=$__cb_rid
			__cb_recv __cb_code __cb_stdin __cb_flags __cb_count __cb_spath __cb_sline
			return 0
		fi
		__cb_request
	done
}

# __cb_request: read the fields of the request __cb_op __cb_rid (not an
# execute) and answer it.
__cb_request() {
	case $__cb_op in
	complete)
		__cb_recv __cb_f1 __cb_f2
		__cb_complete "$__cb_rid" "$__cb_f1" "$__cb_f2"
		;;
	inspect)
		__cb_recv __cb_f1 __cb_f2 __cb_f3
		__cb_inspect "$__cb_rid" "$__cb_f1" "$__cb_f2" "$__cb_f3"
		;;
	isComplete)
		__cb_recv __cb_f1
		__cb_iscomplete "$__cb_rid" "$__cb_f1"
		;;
	variables) __cb_variables "$__cb_rid" ;;
	input) __cb_recv __cb_f1 __cb_f2 ;; # an answer that came too late
	esac
	__cb_f1= __cb_f2= __cb_f3=
}

# __cb_begin: set up the cell that __cb_next read; the main loop then runs
# `. "$__cb_file"` with its stdin from "$__cb_tmp/stdin".
__cb_begin() {
	__cb_busy=1 __cb_intr= __cb_erec= __cb_esrc= __cb_erec1= __cb_esrc1= __cb_errexit= __cb_ran= __cb_myread=
	trap '__cb_onint "$LINENO"; [[ -z $__cb_skipon ]] || trap __cb_skipping DEBUG' INT
	# The cell is a file so that `.` runs it at top level, and so that a DEBUG
	# trap returning 2 can leave it. Leading newlines make $LINENO and bash's
	# messages count the lines of the editor's file.
	local __cb_pad=
	if ((__cb_sline > 1 && __cb_sline <= 1000000)); then
		printf -v __cb_pad '%*s' "$((__cb_sline - 1))" ''
		__cb_pad=${__cb_pad// /$'\n'}
	fi
	if [[ -n ${__cb_spath##*/} ]]; then
		__cb_file=$__cb_tmp/src/${__cb_spath##*/}
	elif ((__cb_count > 0)); then
		__cb_file=$__cb_tmp/src/cell-$__cb_count
	else
		__cb_file=$__cb_tmp/src/cell
	fi
	builtin printf '%s%s\n' "$__cb_pad" "$__cb_code" >|"$__cb_file"
	builtin printf '%s' "$__cb_stdin" >|"$__cb_tmp/stdin"
	if [[ $__cb_flags == *i* ]] && ! declare -F read >/dev/null; then
		read() { __cb_read "$@"; }
		__cb_myread=1
		__cb_bytes "$__cb_stdin"
	fi
	__cb_cpu __cb_cpu0
	# The user's shell options come back last, with errtrace: the ERR trap,
	# which functions inherit only then, makes errexit (`set -e`, perhaps in
	# this very cell) end the cell instead of the shell.
	__cb_ran=1 __cb_addE=
	local __cb_o=${__cb_opts//[!aCeEfkTuvx]/}
	[[ $__cb_o == *E* ]] || __cb_o+=E __cb_addE=1
	set "-$__cb_o"
}

# __cb_end STATUS: the cell is over: back to the driver's state; send the
# error event (if any) and done.
__cb_end() {
	__cb_busy=
	trap '' INT
	[[ -z $__cb_skipon ]] || __cb_unskip
	# The user's options: as the cell left them, or as they were in a read
	# that was asking the client when an interrupt came.
	[[ -z $__cb_ran ]] || __cb_opts=${__cb_ropts:-$-}
	set +aCeEfkTuvx
	__cb_ropts=
	local __cb_st=$1 __cb_status=ok __cb_ename __cb_evalue __cb_tb=() __cb_ms __cb_ev __cb_x
	[[ -z $__cb_addE ]] || __cb_opts=${__cb_opts//E/}
	if [[ -n $__cb_errexit ]]; then
		# errexit ended the cell: the ERR trap turned it off for that; on again
		# for the next cell.
		__cb_opts+=e
		__cb_erec=$__cb_errexit __cb_esrc=$__cb_errsrc
		__cb_st=${__cb_erec%%:*}
	fi
	# The ERR trap's last record ("status:line:command" and the file), unless
	# it is the failing `.` of the main loop: then the one before.
	[[ -n $__cb_esrc ]] || __cb_erec=$__cb_erec1 __cb_esrc=$__cb_esrc1
	__cb_cpu __cb_ms
	[[ -z $__cb_myread ]] || unset -f read
	[[ -z $__cb_file ]] || : >|"$__cb_file" # functions keep their text
	if [[ -n $__cb_intr ]]; then
		__cb_status=interrupted __cb_ename=Interrupted __cb_evalue=SIGINT
		__cb_tb=("$__cb_intr")
	elif ((__cb_st != 0)); then
		__cb_status=error __cb_ename=ExitStatus __cb_evalue=$__cb_st
		# The last failing command is named if its status is the cell's.
		if [[ $__cb_esrc == "$__cb_tmp/src/"* && ${__cb_erec%%:*} == "$__cb_st" ]]; then
			__cb_erec=${__cb_erec#*:}
			__cb_place "$__cb_esrc" "${__cb_erec%%:*}"
			__cb_tb=("$__cb_j: ${__cb_erec#*:}: exit status $__cb_st")
		elif [[ -n $__cb_lostcell ]]; then
			__cb_tb=("$__cb_lostcell: fatal shell error, shell restarted: exit status $__cb_st")
		else
			__cb_tb=("exit status $__cb_st")
		fi
	fi
	__cb_q "$__cb_id"
	__cb_ev="{\"ev\":\"done\",\"id\":$__cb_j,\"status\":\"$__cb_status\""
	if [[ $__cb_status != ok ]]; then
		__cb_q "$__cb_ename"
		__cb_x="{\"ename\":$__cb_j"
		__cb_q "$__cb_evalue"
		__cb_x+=",\"evalue\":$__cb_j"
		__cb_qa "${__cb_tb[@]}"
		__cb_x+=",\"traceback\":$__cb_j}"
		__cb_q "$__cb_id"
		__cb_send "{\"ev\":\"error\",\"id\":$__cb_j,${__cb_x:1}"
		__cb_ev+=",\"error\":$__cb_x"
	fi
	[[ -z $__cb_cpu0 || -z $__cb_ms ]] || __cb_ev+=",\"cpuMs\":$((__cb_ms - __cb_cpu0))"
	__cb_send "$__cb_ev}"
	return 0
}

# __cb_cpu NAME: NAME = the CPU milliseconds used so far by the shell and its
# waited-for children (the sum of what `times` prints: "0m1.250s 0m0.010s"
# twice), or empty.
__cb_cpu() {
	local -n __cb_cout=$1
	local __cb_ct __cb_cms=0
	__cb_cout=
	times >|"$__cb_tmp/times" || return 0
	IFS=$' \n' builtin read -r -d '' -a __cb_ct <"$__cb_tmp/times" # ends at EOF: 1
	for __cb_ct in "${__cb_ct[@]}"; do
		[[ $__cb_ct == +([0-9])m+([0-9])[.,][0-9][0-9][0-9]s ]] || return 0
		((__cb_cms += 10#${__cb_ct%%m*} * 60000 + 10#${__cb_ct//[!0-9]/} % 100000))
	done
	__cb_cout=$__cb_cms
}

# __cb_place FILE LINE: __cb_j = how an error names a line of the user's code.
__cb_place() {
	local __cb_f=$1
	if [[ $__cb_f == "$__cb_file" && -n $__cb_spath ]]; then
		__cb_f=$__cb_spath
	else
		__cb_f=${__cb_f#"$__cb_tmp/src/"}
	fi
	__cb_j="$__cb_f: line $2"
}

# __cb_where LINENO: called by a trap handler, __cb_j = the place of the
# innermost frame that runs a cell's code (LINENO is the trap's $LINENO), or
# empty when none does.
__cb_where() {
	local __cb_i
	for ((__cb_i = 2; __cb_i < ${#BASH_SOURCE[@]}; __cb_i++)); do
		if [[ ${BASH_SOURCE[__cb_i]} == "$__cb_tmp/src/"* ]]; then
			((__cb_i == 2)) || set -- "${BASH_LINENO[__cb_i - 1]}"
			__cb_place "${BASH_SOURCE[__cb_i]}" "$1"
			return 0
		fi
	done
	__cb_j=
}

# The INT trap during a cell: skip the rest of it.
__cb_onint() {
	[[ -n $__cb_busy ]] || return 0
	__cb_where "$1"
	__cb_intr=interrupted
	[[ -z $__cb_j ]] || __cb_intr="$__cb_j: $BASH_COMMAND: interrupted"
	__cb_skip
}

# Under errexit, the ERR trap calls this: end the cell instead of the shell.
__cb_onerr() {
	[[ -n $__cb_busy && -z $__cb_skipon && $BASHPID == "$$" ]] || return 0
	set +e
	__cb_errexit=$__cb_erec __cb_errsrc=$__cb_esrc
	__cb_skip
}

# __cb_skip: skip the rest of the cell: the trap string that called this
# sets a DEBUG trap (there, not in a function, which would put back a DEBUG
# trap of the user's on return) that refuses, under extdebug, every command
# that is not the driver's. A DEBUG trap of the user's is lost.
__cb_skip() {
	[[ -z $__cb_skipon ]] || return 0
	__cb_skipon=1 __cb_extdebug=
	! shopt -q extdebug || __cb_extdebug=1
	shopt -s extdebug
}

# The DEBUG trap while skipping: 2 makes bash return from the running
# function or sourced file; elsewhere non-zero skips the command. The
# driver's own functions run to their end.
__cb_skipping() {
	[[ ${FUNCNAME[1]-} == __cb_* || $BASH_COMMAND == __cb_end* ]] && return 0
	return 2
}

# __cb_unskip: end __cb_skip.
__cb_unskip() {
	trap - DEBUG
	[[ -n $__cb_extdebug ]] || shopt -u extdebug
	__cb_skipon=
}

# __cb_bytes STR: __cb_insize = the length of STR in bytes.
__cb_bytes() {
	local LC_ALL=C
	__cb_insize=${#1}
}

# `read` while a cell with allowStdin runs (the function read() calls this):
# a read of the cell's own stdin that finds it used up asks the client (an
# input event) and reads the answer. Other reads are the builtin's.
__cb_read() {
	__cb_ropts=$- # the user's options, given back below
	set +aCeEfkTuvx
	local OPTIND=1 OPTARG __cb_o __cb_p= __cb_s= __cb_u= __cb_k __cb_pos= __cb_st=0
	while getopts ':a:d:ei:n:N:p:rst:u:' __cb_o; do
		case $__cb_o in
		p) __cb_p=$OPTARG ;;
		s) __cb_s=1 ;;
		u) __cb_u=1 ;;
		esac
	done
	# How far fd 0 is read, when it is the cell's stdin (needs /proc).
	if [[ -z $__cb_u && /dev/stdin -ef $__cb_tmp/stdin ]]; then
		IFS=$': \t' builtin read -r -u 9 __cb_k __cb_pos __cb_k 9<"/proc/$BASHPID/fdinfo/0" || __cb_pos=
	fi
	if [[ $__cb_pos == "$__cb_insize" ]]; then
		if __cb_ask "$__cb_p" "$__cb_s"; then
			# A transcript, as a terminal would show it.
			if [[ -n $__cb_s ]]; then
				builtin printf '%s\n' "$__cb_p"
			else
				builtin printf '%s%s\n' "$__cb_p" "$__cb_value"
			fi
			builtin read "$@" <<<"$__cb_value" || __cb_st=$?
		else
			builtin read "$@" </dev/null || __cb_st=$?
		fi
	else
		builtin read "$@" || __cb_st=$?
	fi
	__cb_o=${__cb_ropts//[!aCeEfkTuvx]/}
	__cb_ropts=
	[[ -z $__cb_o ]] || set "-$__cb_o"
	return "$__cb_st"
}

# __cb_ask PROMPT PASSWORD: send an input event and wait for its answer,
# answering other requests meanwhile. Fails when the answer is end of file;
# else the value is in __cb_value.
__cb_ask() {
	local __cb_pw=false __cb_x
	[[ -z $2 ]] || __cb_pw=true
	__cb_q "$__cb_id"
	__cb_x="{\"ev\":\"input\",\"id\":$__cb_j"
	__cb_q "$1"
	__cb_send "$__cb_x,\"prompt\":$__cb_j,\"password\":$__cb_pw}"
	while :; do
		__cb_recv __cb_op __cb_rid || return 1 # interrupted
		if [[ $__cb_op == input ]]; then
			__cb_recv __cb_value __cb_f1
			[[ $__cb_rid == "$__cb_id" ]] || continue
			[[ $__cb_f1 != 1 ]]
			return
		fi
		__cb_request
	done
}

# __cb_lines CMD...: run CMD (a builtin); __cb_l = the lines it printed.
__cb_lines() {
	"$@" >|"$__cb_tmp/out" 2>/dev/null
	mapfile -t __cb_l <"$__cb_tmp/out"
}

# complete ID CODE CURSOR: names of commands in command position, of
# variables after $, else of files. Positions count code points.
__cb_complete() {
	local LC_ALL
	{ LC_ALL=C.UTF-8; } 2>/dev/null
	local __cb_c=$2 __cb_pos=$3 __cb_w __cb_h __cb_m __cb_start __cb_kind=c
	((__cb_pos >= 0 && __cb_pos <= ${#__cb_c})) || __cb_pos=${#__cb_c}
	__cb_c=${__cb_c:0:__cb_pos}
	__cb_w=${__cb_c##*[$' \t\n;|&()<>`"\'=']}
	__cb_start=$((__cb_pos - ${#__cb_w}))
	__cb_h=${__cb_c:0:__cb_start}
	__cb_h=${__cb_h%"${__cb_h##*[![:blank:]]}"} # what comes before, less blanks
	if [[ $__cb_w == *'$'* ]]; then
		__cb_w=${__cb_w##*'$'}
		__cb_w=${__cb_w#\{}
		__cb_start=$((__cb_pos - ${#__cb_w}))
		__cb_kind=v
	elif [[ $__cb_w == */* || -n $__cb_h && $__cb_h != *[$';|&(`\n{!'] ]] &&
		! [[ $__cb_h =~ (^|[[:space:]])(then|do|else|elif|if|while|until|time|exec|command|sudo|env|xargs)$ ]]; then
		__cb_kind=f
	fi
	compgen "-$__cb_kind" -- "$__cb_w" >|"$__cb_tmp/out" 2>/dev/null
	if [[ $__cb_kind != v ]] && LC_ALL=C command -p sort -u "$__cb_tmp/out" >|"$__cb_tmp/out2" 2>/dev/null; then
		mapfile -t __cb_l <"$__cb_tmp/out2"
	else
		mapfile -t __cb_l <"$__cb_tmp/out"
	fi
	local -A __cb_seen=()
	local -a __cb_out=()
	for __cb_m in "${__cb_l[@]}"; do
		[[ $__cb_m != __cb_* && -z ${__cb_seen[$__cb_m]-} ]] || continue
		__cb_seen[$__cb_m]=1
		[[ $__cb_kind != f || ! -d ${__cb_m/#\~/$HOME} ]] || __cb_m+=/
		__cb_out+=("$__cb_m")
	done
	__cb_qa "${__cb_out[@]}"
	__cb_reply "$1" "{\"matches\":$__cb_j,\"cursorStart\":$__cb_start,\"cursorEnd\":$__cb_pos}"
}

# inspect ID CODE CURSOR LEVEL: `type -a` of the word at the cursor, with
# `help` of builtins and keywords (at level 0 only their synopsis and one-line
# description); `declare -p` of a $name.
__cb_inspect() {
	local LC_ALL
	{ LC_ALL=C.UTF-8; } 2>/dev/null
	local __cb_c=$2 __cb_pos=$3 __cb_w __cb_t __cb_text=
	((__cb_pos >= 0 && __cb_pos <= ${#__cb_c})) || __cb_pos=${#__cb_c}
	__cb_w=${__cb_c:0:__cb_pos}
	__cb_t=${__cb_c:__cb_pos}
	__cb_w=${__cb_w##*[!A-Za-z0-9_.:+@%/,\$\{-]}${__cb_t%%[!A-Za-z0-9_.:+@%/,-]*}
	if [[ $__cb_w == \$* ]]; then
		__cb_w=${__cb_w#\$}
		__cb_w=${__cb_w#\{}
		[[ $__cb_w == __cb_* ]] || __cb_lines declare -p "$__cb_w"
	elif [[ -n $__cb_w && $__cb_w != __cb_* ]]; then
		__cb_lines type -a "$__cb_w"
		if ((${#__cb_l[@]})); then
			__cb_text=("${__cb_l[@]}")
			__cb_lines type -t "$__cb_w"
			if [[ ${__cb_l[0]} == builtin || ${__cb_l[0]} == keyword ]]; then
				if (($4 > 0)); then
					__cb_lines help "$__cb_w"
				else
					__cb_lines help -s "$__cb_w"
					__cb_text+=("" "${__cb_l[@]}")
					__cb_lines help -d "$__cb_w"
				fi
				__cb_l=("${__cb_text[@]}" "${__cb_l[@]}")
			else
				__cb_l=("${__cb_text[@]}")
			fi
		fi
	else
		__cb_l=()
	fi
	if ((${#__cb_l[@]})); then
		local IFS=$'\n'
		__cb_q "${__cb_l[*]}"
		__cb_reply "$1" "{\"found\":true,\"data\":{\"text/plain\":$__cb_j}}"
	else
		__cb_reply "$1" '{"found":false}'
	fi
}

# isComplete ID CODE: `bash -n` on the code (with the user's extglob).
__cb_iscomplete() {
	local __cb_c=$2 __cb_st=0 __cb_msg= __cb_s=complete __cb_x=() __cb_t
	! shopt -q extglob || __cb_x=(-O extglob)
	LC_ALL=C "$BASH" "${__cb_x[@]}" -n <<<"$__cb_c" 2>|"$__cb_tmp/out" || __cb_st=$?
	IFS= builtin read -r -d '' __cb_msg <"$__cb_tmp/out"
	__cb_t=${__cb_c%"${__cb_c##*[!\\]}"} # without its trailing backslashes
	if [[ $__cb_msg == *"unexpected end of file"* || $__cb_msg == *"unexpected EOF"* ]]; then
		__cb_s=incomplete
	elif ((__cb_st != 0)); then
		__cb_s=invalid
	elif [[ $__cb_msg == *"delimited by end-of-file"* || $(((${#__cb_c} - ${#__cb_t}) % 2)) == 1 ]]; then
		__cb_s=incomplete # an open here-document, a continued line
	fi
	__cb_reply "$1" "{\"status\":\"$__cb_s\"}"
}

# variables ID: the user's variables (not the shell's own, not the driver's).
__cb_variables() {
	local __cb_n __cb_a __cb_t __cb_s __cb_z __cb_k __cb_out= IFS=' '
	__cb_lines compgen -v
	for __cb_n in "${__cb_l[@]}"; do
		[[ $__cb_n != __cb_* && -z ${__cb_shell[$__cb_n]-} ]] || continue
		local -n __cb_r=$__cb_n
		__cb_a=${!__cb_n@a}
		case $__cb_a in
		*A*)
			__cb_t=assoc __cb_z=${#__cb_r[@]} __cb_s=
			for __cb_k in "${!__cb_r[@]}"; do
				__cb_s+=" [$__cb_k]=${__cb_r[$__cb_k]}"
				((${#__cb_s} < 100)) || break
			done
			__cb_s="(${__cb_s# })"
			;;
		*a*)
			__cb_t=array __cb_z=${#__cb_r[@]}
			__cb_s="(${__cb_r[*]:0:20})"
			;;
		*)
			__cb_t=string __cb_z=${#__cb_r} __cb_s=${__cb_r:0:101}
			[[ $__cb_a != *i* ]] || __cb_t=integer
			[[ $__cb_a != *x* ]] || __cb_t=exported
			;;
		esac
		unset -n __cb_r
		((${#__cb_s} <= 100)) || __cb_s="${__cb_s:0:97}..."
		__cb_q "$__cb_n"
		__cb_out+=",{\"name\":$__cb_j,\"type\":\"$__cb_t\""
		__cb_q "$__cb_s"
		__cb_out+=",\"summary\":$__cb_j,\"size\":$__cb_z}"
	done
	__cb_reply "$1" "{\"variables\":[${__cb_out#,}]}"
}

# The ERR trap keeps the last failing command (a cheap trap: it runs for
# every command that fails outside a condition).
trap '__cb_erec1=$__cb_erec __cb_esrc1=$__cb_esrc __cb_erec=$?:$LINENO:$BASH_COMMAND __cb_esrc=${BASH_SOURCE[0]-}
[[ $- != *e* ]] || { __cb_onerr; [[ -z $__cb_skipon ]] || trap __cb_skipping DEBUG; }' ERR
trap '' INT # idle: SIGINT does nothing
# The EXIT trap. A fatal error (an unset ${x:?}, a `set -u` error) ends a
# non-interactive shell even during a cell: then the driver starts again in
# this process (exec, same pid) and gets back the user's variables,
# functions, aliases and options; the cell ends in error. An `exit` in a
# cell ends the kernel.
__cb_exit() {
	local __cb_st=$? __cb_o=$- __cb_n __cb_v=() __cb_f=()
	set +aCeEfkTuvx
	if [[ -z $__cb_busy || $__cb_st != 127 || $BASH_COMMAND != 'eval "$__cb_main"' || $BASHPID != "$$" ]]; then
		rm -rf "$__cb_tmp" 2>/dev/null
		return
	fi
	compgen -v >|"$__cb_tmp/out"
	while IFS= builtin read -r __cb_n; do
		[[ $__cb_n == __cb_* || -n ${__cb_shell[$__cb_n]-} ]] || __cb_v+=("$__cb_n")
	done <"$__cb_tmp/out"
	compgen -A function >|"$__cb_tmp/out"
	while IFS= builtin read -r __cb_n; do
		[[ $__cb_n == __cb_* || $__cb_n == read && -n $__cb_myread ]] || __cb_f+=("$__cb_n")
	done <"$__cb_tmp/out"
	{
		declare -p IFS OLDPWD "${__cb_v[@]}"
		((${#__cb_f[@]} == 0)) || declare -f "${__cb_f[@]}"
		alias -p
		shopt -p
		shopt -po pipefail
		builtin printf '__cb_opts=%q\n' "${__cb_ropts:-$__cb_o}"
	} >|"$__cb_tmp/state" 2>/dev/null
	# Unwinding to the top level put the channel back on fds 3 and 4. SIGINT
	# must not be ignored across exec (the new shell could not trap it).
	[[ ! -e /dev/fd/$__cb_rqfd ]] || exec 3<&"$__cb_rqfd" 4>&"$__cb_evfd"
	trap - INT
	__cb_place "$__cb_file" ""
	__CB_STATE=$__cb_tmp __CB_ID=$__cb_id __CB_CELL=${__cb_j%: line } \
		exec "$BASH" --noprofile --norc -c "$BASH_EXECUTION_STRING" "$0"
}

trap __cb_exit EXIT

# The main loop. Its redirections move fds 3 and 4 to 10 and 11 (the lowest
# free fds from 10), which bash marks close-on-exec as it does for every fd it
# saves, so programs that cells start do not inherit the channel. A `break 2`
# in a cell leaves the loops; the eval then enters them again.
exec 10<&- 11<&-
if [[ -z ${__cb_lost-} ]]; then
	__cb_q "${BASH_VERSINFO[0]}.${BASH_VERSINFO[1]}.${BASH_VERSINFO[2]}"
	printf '{"ev":"ready","version":%s,"pid":%d}\n' "$__cb_j" "$$" >&4
else
	# Back after a fatal error: the user's state, then the end of the cell.
	. "$__cb_tmp/state" 2>/dev/null
	__cb_id=$__cb_lost __cb_busy=1
	__cb_end 127 11>&4
	__cb_lostcell=
fi
__cb_main='while :; do
	while __cb_next; do
		__cb_begin
		. "$__cb_file" <"$__cb_tmp/stdin"
		{ __cb_end "$?"; } 2>/dev/null
	done
done 3<&- 4>&-
eval "$__cb_main"'
eval "$__cb_main"
