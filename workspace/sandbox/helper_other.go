//go:build !linux

package sandbox

func helperPath() (string, string) { return "", "sandboxes need Linux" }
