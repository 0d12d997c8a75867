package sandboxtest

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
)

// The seccomp filter kills any system call whose architecture is not
// x86_64, so an i386 call (int $0x80 from a 64-bit process) dies of SIGSYS
// before the kernel runs it. A kernel without 32-bit syscall emulation
// (CONFIG_IA32_EMULATION unset, or ia32_emulation=0 on its command line)
// has no int $0x80 gate for user space: the instruction faults, the process
// gets SIGSEGV and the call never reaches the kernel, filter or not. So do
// kernels built with it that turn it off at boot, as paravirtualized guests
// may. Either way the call does not run; the tests of the i386 rule accept
// both, and use a run without the filter (the control) to know which one
// the host must show. The kernel's configuration cannot tell on its own.

// I386Path is how an i386 system call ended.
type I386Path int

const (
	// I386Ran: the call ran and the process printed its result.
	I386Ran I386Path = iota + 1
	// I386Killed: SIGSYS before anything was printed.
	I386Killed
	// I386NoEmulation: SIGSEGV before anything was printed.
	I386NoEmulation
)

func (p I386Path) String() string {
	switch p {
	case I386Ran:
		return "the 32-bit system call ran and returned"
	case I386Killed:
		return "seccomp killed it with SIGSYS"
	case I386NoEmulation:
		return "this host has no 32-bit syscall emulation: SIGSEGV, the call never reached the kernel"
	}
	return fmt.Sprintf("I386Path(%d)", int(p))
}

// I386Outcome is how a process that made one i386 call ended.
type I386Outcome struct {
	// Signal killed it; 0 if it exited.
	Signal syscall.Signal
	// ExitCode, when it exited.
	ExitCode int
	// Reached: it printed that it was about to make the call, so a death
	// after it is the call's and not an earlier failure's.
	Reached bool
	// Returned: it printed the call's result, so the call ran.
	Returned bool
}

func (o I386Outcome) String() string {
	s := fmt.Sprintf("exit %d", o.ExitCode)
	if o.Signal != 0 {
		s = "killed by " + o.Signal.String()
	}
	switch {
	case o.Returned:
		return s + ", after printing the call's result"
	case !o.Reached:
		return s + ", before making the call"
	}
	return s + ", making the call and printing no result"
}

// ClassifyI386 tells which path o took. A process that printed a result
// ran the call whatever happened next; one that reached the call and
// printed no result must have died of SIGSYS or SIGSEGV, else the run says
// nothing about the call.
func ClassifyI386(o I386Outcome) (I386Path, error) {
	switch {
	case o.Returned:
		return I386Ran, nil
	case !o.Reached:
		return 0, fmt.Errorf("the process %v", o)
	case o.Signal == syscall.SIGSYS:
		return I386Killed, nil
	case o.Signal == syscall.SIGSEGV:
		return I386NoEmulation, nil
	}
	return 0, fmt.Errorf("the process %v: neither the call's result nor death by SIGSYS or SIGSEGV", o)
}

// I386Emulation is what the kernel's configuration and command line say
// about 32-bit syscall emulation.
type I386Emulation struct {
	Known bool   // the configuration could be read
	On    bool   // int $0x80 reaches the kernel's i386 table
	Why   string // the settings it was read from
}

// HostI386Emulation reads the running kernel's configuration
// (/proc/config.gz or /boot/config-RELEASE) and /proc/cmdline. Known is
// false when the configuration cannot be read. On is what they ask for: a
// kernel may still turn the emulation off at boot (Xen PV and other
// paravirtualized guests do), so only Known && !On is certain.
func HostI386Emulation() I386Emulation {
	config, src := kernelConfig()
	if config == nil {
		return I386Emulation{Why: "the kernel's configuration is not readable"}
	}
	cmdline, _ := os.ReadFile("/proc/cmdline")
	return i386EmulationFrom(config, src, string(cmdline))
}

func kernelConfig() ([]byte, string) {
	if f, err := os.Open("/proc/config.gz"); err == nil {
		defer f.Close()
		if z, err := gzip.NewReader(f); err == nil {
			if b, err := io.ReadAll(z); err == nil {
				return b, "/proc/config.gz"
			}
		}
	}
	if rel, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		p := "/boot/config-" + strings.TrimSpace(string(rel))
		if b, err := os.ReadFile(p); err == nil {
			return b, p
		}
	}
	return nil, ""
}

// i386EmulationFrom applies the kernel's rules: CONFIG_IA32_EMULATION
// builds the emulation, CONFIG_IA32_EMULATION_DEFAULT_DISABLED turns it off
// unless the command line says ia32_emulation=1, and ia32_emulation=0
// turns it off. Parameters after "--" belong to init, not the kernel.
func i386EmulationFrom(config []byte, src, cmdline string) I386Emulation {
	opts := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(config))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok && strings.HasPrefix(k, "CONFIG_IA32_EMULATION") {
			opts[k] = v
		}
	}
	if opts["CONFIG_IA32_EMULATION"] != "y" {
		return I386Emulation{Known: true, Why: src + ": CONFIG_IA32_EMULATION is not set"}
	}
	on, why := true, src+": CONFIG_IA32_EMULATION=y"
	if opts["CONFIG_IA32_EMULATION_DEFAULT_DISABLED"] == "y" {
		on, why = false, why+", CONFIG_IA32_EMULATION_DEFAULT_DISABLED=y"
	}
	for _, f := range strings.Fields(cmdline) {
		if f == "--" {
			break
		}
		v, ok := strings.CutPrefix(f, "ia32_emulation=")
		if !ok {
			continue
		}
		// As the kernel's kstrtobool reads it.
		switch strings.ToLower(v) {
		case "1", "y", "yes", "on", "true":
			on, why = true, why+", "+f
		case "0", "n", "no", "off", "false":
			on, why = false, why+", "+f
		}
	}
	return I386Emulation{Known: true, On: on, Why: why}
}

// CheckI386 judges the same i386 call made without the filter (control)
// and under it (filtered), on a host whose configuration says host. The
// control decides whether the host runs 32-bit calls. It fails if the
// filtered call ran, or if the runs cannot tell: a control killed by
// SIGSYS, a filtered run that died of SIGSEGV where the control shows the
// emulation works (the filter must kill it with SIGSYS there), or a
// control that returned on a kernel configured without the emulation. It
// returns the path the filtered run took, and a note on the host to log.
func CheckI386(control, filtered I386Outcome, host I386Emulation) (I386Path, string, error) {
	cp, err := ClassifyI386(control)
	if err != nil {
		return 0, "", fmt.Errorf("control (no filter): %w", err)
	}
	fp, err := ClassifyI386(filtered)
	if err != nil {
		return 0, "", fmt.Errorf("under the filter: %w", err)
	}
	if fp == I386Ran {
		return fp, "", errors.New("under the filter: the 32-bit system call ran and returned")
	}
	var note string
	switch cp {
	case I386Killed:
		return fp, "", errors.New("control (no filter): killed by SIGSYS without the filter; the runs cannot tell whether the filter works")
	case I386Ran:
		if host.Known && !host.On {
			return fp, "", fmt.Errorf("control (no filter): the 32-bit call returned, but %s says the kernel has no emulation", host.Why)
		}
		if fp != I386Killed {
			return fp, "", fmt.Errorf("under the filter: %v; this host runs 32-bit calls (the control did), so the filter must kill it with SIGSYS", filtered)
		}
		note = "the host runs 32-bit system calls: without the filter the call returned"
	case I386NoEmulation:
		note = "the host has no 32-bit syscall emulation: without the filter the call faulted too"
		if host.Known && host.On {
			note += " (" + host.Why + " builds it, so the kernel turned it off at boot)"
		}
	}
	return fp, note, nil
}
