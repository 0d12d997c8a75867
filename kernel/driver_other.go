//go:build !linux

package kernel

import (
	"context"
	"errors"
	"fmt"
)

// errLinuxOnly is every kernel start off Linux.
var errLinuxOnly = errors.New("kernel: Linux only (kernels run in a workspace's sandbox, which needs Linux)")

// startDriver fails: kernels need Linux.
func startDriver(_ context.Context, cfg driverConfig) (*driver, error) {
	return nil, fmt.Errorf("start %s kernel: %w", cfg.lang, errLinuxOnly)
}

// drain has nothing to read: no driver runs off Linux.
func (d *driver) drain(*event) {}

// kill and interrupt have nothing to act on: no driver runs off Linux.
func (d *driver) kill()                               {}
func (d *driver) interrupt(string, func() bool) error { return errLinuxOnly }
