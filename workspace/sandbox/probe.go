package sandbox

import (
	"context"
	"errors"
	"strings"
	"time"
)

// Layer names, in the order a Report lists them. They match the field names
// of the protocol's sandbox capabilities where one exists.
const (
	LayerUserNamespaces   = "userNamespaces"
	LayerMountNamespace   = "mountNamespace"
	LayerOverlay          = "overlay"
	LayerPidNamespace     = "pidNamespace"
	LayerNetworkNamespace = "networkNamespace"
	LayerSeccomp          = "seccomp"
	LayerLandlock         = "landlock"
	LayerCgroups          = "cgroups"
	LayerIDMappedMounts   = "idmappedMounts"
)

// LayerNames returns every layer name in report order.
func LayerNames() []string {
	return []string{
		LayerUserNamespaces, LayerMountNamespace, LayerOverlay, LayerPidNamespace,
		LayerNetworkNamespace, LayerSeccomp, LayerLandlock, LayerCgroups, LayerIDMappedMounts,
	}
}

// DefaultRequired returns the layers the default sandbox mode ("required")
// cannot start without. Landlock and cgroups are added when available;
// idmapped mounts are reported only.
func DefaultRequired() []string {
	return []string{
		LayerUserNamespaces, LayerMountNamespace, LayerOverlay, LayerPidNamespace,
		LayerNetworkNamespace, LayerSeccomp,
	}
}

// Layer is what the host can provide of one isolation layer.
type Layer struct {
	Name      string `json:"name"`
	Available bool   `json:"available"`
	// Reason says why the layer is unavailable; set whenever Available is false.
	Reason string `json:"reason,omitempty"`
	// Fix says what to do about it, naming the host policy to change.
	Fix string `json:"fix,omitempty"`
	// Detail is what was found when available (for example "ABI 6").
	Detail string `json:"detail,omitempty"`
}

// ProbeOptions configure Probe.
type ProbeOptions struct {
	// StateDir is the directory whose filesystem will hold workspaces' upper
	// layers; the overlay probe puts its upper layer there. When empty or
	// missing, os.TempDir() is used instead (see Report.ScratchDir).
	StateDir string
	// Timeout bounds each helper process; 0 means 5 s.
	Timeout time.Duration
}

// Report is the result of Probe.
type Report struct {
	// Layers has one entry per name in LayerNames, in that order.
	Layers []Layer `json:"layers"`
	// LandlockABI is the kernel's Landlock ABI version, 0 without Landlock.
	LandlockABI int `json:"landlockABI"`
	// ScratchDir is where the overlay probe created its upper layer, and
	// ScratchFS that directory's filesystem type ("ext4", "overlay", ...).
	ScratchDir string `json:"scratchDir"`
	ScratchFS  string `json:"scratchFS,omitempty"`
	// Took is how long the probe ran.
	Took time.Duration `json:"tookNs"`
}

// Summary is the Report as booleans, shaped like the protocol's
// SandboxCapabilities.
type Summary struct {
	UserNamespaces   bool
	MountNamespace   bool
	Overlay          bool
	PidNamespace     bool
	NetworkNamespace bool
	Seccomp          bool
	Landlock         bool
	Cgroups          bool
	IDMappedMounts   bool
	LandlockABI      int
	// Reason joins "layer: reason" of every unavailable layer with "; ",
	// leaving out idmapped mounts, which are reported only.
	Reason string
}

// Probe checks what isolation this host can provide. It never panics and
// always returns one Layer per name in LayerNames; a check that cannot run
// reports its layer unavailable with the reason.
func Probe(ctx context.Context, opts ProbeOptions) Report {
	start := time.Now()
	r := probe(ctx, opts)
	r.Took = time.Since(start)
	return r
}

// Layer returns the named layer.
func (r Report) Layer(name string) (Layer, bool) {
	for _, l := range r.Layers {
		if l.Name == name {
			return l, true
		}
	}
	return Layer{}, false
}

// Available says whether the named layer is available.
func (r Report) Available(name string) bool {
	l, ok := r.Layer(name)
	return ok && l.Available
}

// Missing returns the named layers that are unavailable (a name the report
// lacks counts as unavailable).
func (r Report) Missing(names ...string) []Layer {
	var out []Layer
	for _, n := range names {
		l, ok := r.Layer(n)
		if !ok {
			l = Layer{Name: n, Reason: "not probed"}
		}
		if !l.Available {
			out = append(out, l)
		}
	}
	return out
}

// Summary returns the report as booleans.
func (r Report) Summary() Summary {
	s := Summary{
		UserNamespaces:   r.Available(LayerUserNamespaces),
		MountNamespace:   r.Available(LayerMountNamespace),
		Overlay:          r.Available(LayerOverlay),
		PidNamespace:     r.Available(LayerPidNamespace),
		NetworkNamespace: r.Available(LayerNetworkNamespace),
		Seccomp:          r.Available(LayerSeccomp),
		Landlock:         r.Available(LayerLandlock),
		Cgroups:          r.Available(LayerCgroups),
		IDMappedMounts:   r.Available(LayerIDMappedMounts),
		LandlockABI:      r.LandlockABI,
	}
	var reasons []string
	for _, l := range r.Layers {
		if !l.Available && l.Name != LayerIDMappedMounts {
			reasons = append(reasons, l.Name+": "+l.Reason)
		}
	}
	s.Reason = strings.Join(reasons, "; ")
	return s
}

// ErrLinuxOnly is the error of everything in this package on other systems.
var ErrLinuxOnly = errors.New("sandbox: Linux only")
