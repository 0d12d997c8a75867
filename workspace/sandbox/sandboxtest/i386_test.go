package sandboxtest

import (
	"syscall"
	"testing"
)

func TestClassifyI386(t *testing.T) {
	for _, tt := range []struct {
		o    I386Outcome
		want I386Path // 0: an error
	}{
		{I386Outcome{Reached: true, Returned: true}, I386Ran},
		{I386Outcome{Signal: syscall.SIGSYS, Reached: true, Returned: true}, I386Ran},
		{I386Outcome{Signal: syscall.SIGSYS, Reached: true}, I386Killed},
		{I386Outcome{Signal: syscall.SIGSEGV, Reached: true}, I386NoEmulation},
		{I386Outcome{Signal: syscall.SIGSEGV}, 0}, // before the call
		{I386Outcome{Signal: syscall.SIGSYS}, 0},
		{I386Outcome{Reached: true}, 0},
		{I386Outcome{ExitCode: 2, Reached: true}, 0},
		{I386Outcome{Signal: syscall.SIGKILL, Reached: true}, 0},
		{I386Outcome{Signal: syscall.SIGILL, Reached: true}, 0},
	} {
		got, err := ClassifyI386(tt.o)
		if got != tt.want || (err != nil) != (tt.want == 0) {
			t.Errorf("ClassifyI386(%v) = %v, %v; want %v", tt.o, got, err, tt.want)
		}
	}
}

func TestI386EmulationFrom(t *testing.T) {
	const on, off = true, false
	for _, tt := range []struct {
		config, cmdline string
		want            bool
	}{
		{"CONFIG_IA32_EMULATION=y\n# CONFIG_IA32_EMULATION_DEFAULT_DISABLED is not set\n", "quiet", on},
		{"# CONFIG_IA32_EMULATION is not set\n", "quiet", off},
		{"# CONFIG_IA32_EMULATION is not set\n", "ia32_emulation=1", off},
		{"CONFIG_IA32_EMULATION=y\n", "quiet ia32_emulation=0", off},
		{"CONFIG_IA32_EMULATION=y\n", "ia32_emulation=off", off},
		{"CONFIG_IA32_EMULATION=y\nCONFIG_IA32_EMULATION_DEFAULT_DISABLED=y\n", "quiet", off},
		{"CONFIG_IA32_EMULATION=y\nCONFIG_IA32_EMULATION_DEFAULT_DISABLED=y\n", "ia32_emulation=true", on},
		{"CONFIG_IA32_EMULATION=y\n", "quiet -- ia32_emulation=0", on}, // init's argument
	} {
		got := i386EmulationFrom([]byte(tt.config), "config", tt.cmdline)
		if !got.Known || got.On != tt.want {
			t.Errorf("config %q, cmdline %q: %+v; want on=%v", tt.config, tt.cmdline, got, tt.want)
		}
	}
}

// TestCheckI386 feeds the check the outcomes of hosts with and without
// 32-bit emulation.
func TestCheckI386(t *testing.T) {
	var (
		ran    = I386Outcome{Reached: true, Returned: true}
		sigsys = I386Outcome{Signal: syscall.SIGSYS, Reached: true}
		segv   = I386Outcome{Signal: syscall.SIGSEGV, Reached: true}
		exited = I386Outcome{ExitCode: 1, Reached: true}
		early  = I386Outcome{Signal: syscall.SIGSEGV} // before the call

		unknown  = I386Emulation{}
		emulates = I386Emulation{Known: true, On: true, Why: "CONFIG_IA32_EMULATION=y"}
		lacks    = I386Emulation{Known: true, Why: "ia32_emulation=0"}
	)
	for _, tt := range []struct {
		name              string
		control, filtered I386Outcome
		host              I386Emulation
		want              I386Path // 0: the check must fail
	}{
		{"emulation: filter kills", ran, sigsys, emulates, I386Killed},
		{"emulation, configuration unknown", ran, sigsys, unknown, I386Killed},
		{"emulation: filter let it run", ran, ran, emulates, 0},
		{"emulation: SIGSEGV under the filter", ran, segv, emulates, 0},
		{"emulation: filtered run exited", ran, exited, emulates, 0},
		{"no emulation", segv, segv, lacks, I386NoEmulation},
		{"no emulation, configuration unknown", segv, segv, unknown, I386NoEmulation},
		{"no emulation, killed under the filter", segv, sigsys, lacks, I386Killed},
		{"no emulation: filtered call ran", segv, ran, lacks, 0},
		{"no emulation: filtered run exited", segv, exited, lacks, 0},
		{"no emulation, turned off at boot", segv, segv, emulates, I386NoEmulation},
		{"control died before the call", early, segv, unknown, 0},
		{"filtered run died before the call", segv, early, unknown, 0},
		{"control returned on a kernel without emulation", ran, sigsys, lacks, 0},
		{"control killed by SIGSYS", sigsys, sigsys, unknown, 0},
		{"control exited", exited, sigsys, unknown, 0},
	} {
		got, note, err := CheckI386(tt.control, tt.filtered, tt.host)
		if tt.want == 0 {
			if err == nil {
				t.Errorf("%s: accepted (%v)", tt.name, got)
			}
			continue
		}
		if err != nil || got != tt.want || note == "" {
			t.Errorf("%s: %v, %q, %v; want %v", tt.name, got, note, err, tt.want)
		}
	}
}
