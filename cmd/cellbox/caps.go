package main

import (
	"context"
	"log/slog"
	"sync"

	"github.com/cellbox-dev/cellbox/kernel"
	"github.com/cellbox-dev/cellbox/protocol"
	"github.com/cellbox-dev/cellbox/pty"
	"github.com/cellbox-dev/cellbox/workspace/sandbox"
)

// hostCapabilities starts probing the host right away and returns the
// function initialize calls, and the one kernel/start calls for the
// languages; they wait for the probe the first time only.
func hostCapabilities(stateDir string, log *slog.Logger) (func(context.Context) protocol.ServerCapabilities, func() []kernel.Language) {
	var (
		once      sync.Once
		caps      protocol.ServerCapabilities
		languages []kernel.Language
		done      = make(chan struct{})
	)
	go once.Do(func() {
		defer close(done)
		ctx := context.Background()
		var (
			wg     sync.WaitGroup
			report sandbox.Report
			langs  []kernel.Language
		)
		wg.Add(2)
		go func() { defer wg.Done(); report = sandbox.Probe(ctx, sandbox.ProbeOptions{StateDir: stateDir}) }()
		go func() { defer wg.Done(); langs = kernel.DetectLanguages(ctx) }()
		wg.Wait()
		caps = capabilitiesFrom(report, langs)
		languages = langs
		log.Info("host probed", "took_ms", report.Took.Milliseconds(), "sandbox_missing", caps.Sandbox.Reason)
	})
	return func(ctx context.Context) protocol.ServerCapabilities {
			select {
			case <-done:
			case <-ctx.Done():
			}
			c := caps
			c.Languages = append([]protocol.LanguageCapability(nil), caps.Languages...)
			// Kernelspecs are read anew: one installed meanwhile is seen.
			c.Languages = append(c.Languages, languageCapabilities(kernel.JupyterLanguages())...)
			return c
		}, func() []kernel.Language {
			<-done
			return append(append([]kernel.Language(nil), languages...), kernel.JupyterLanguages()...)
		}
}

func capabilitiesFrom(r sandbox.Report, langs []kernel.Language) protocol.ServerCapabilities {
	s := r.Summary()
	caps := protocol.ServerCapabilities{
		Sandbox: protocol.SandboxCapabilities{
			UserNamespaces:   s.UserNamespaces,
			Overlay:          s.Overlay,
			PidNamespace:     s.PidNamespace,
			NetworkNamespace: s.NetworkNamespace,
			Seccomp:          s.Seccomp,
			Landlock:         s.Landlock,
			Cgroups:          s.Cgroups,
			Reason:           s.Reason,
		},
		Limits: protocol.LimitCapabilities{
			MaxCodeBytes:               kernel.DefaultMaxCodeBytes,
			MaxOutputBytesPerExecution: kernel.DefaultMaxOutputBytes,
			MaxKernels:                 kernel.DefaultMaxKernels,
			MaxPtys:                    pty.DefaultMaxPtys,
		},
	}
	caps.Languages = languageCapabilities(langs)
	caps.Interpreters = kernel.HostInterpreters(langs)
	return caps
}

func languageCapabilities(langs []kernel.Language) []protocol.LanguageCapability {
	var out []protocol.LanguageCapability
	for _, l := range langs {
		out = append(out, protocol.LanguageCapability{
			ID: l.ID, DisplayName: l.DisplayName, Version: l.Version,
			FileExtensions: l.FileExtensions, Available: l.Available, Reason: l.Reason, Unsupported: l.Unsupported,
		})
	}
	return out
}
