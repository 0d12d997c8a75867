package jupyter

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
)

// ConnectionInfo is a Jupyter connection file.
type ConnectionInfo struct {
	Transport       string `json:"transport"`
	IP              string `json:"ip"`
	ShellPort       int    `json:"shell_port"`
	IOPubPort       int    `json:"iopub_port"`
	StdinPort       int    `json:"stdin_port"`
	ControlPort     int    `json:"control_port"`
	HBPort          int    `json:"hb_port"`
	Key             string `json:"key"`
	SignatureScheme string `json:"signature_scheme"`
	KernelName      string `json:"kernel_name,omitempty"`
}

// maxConnectionFile bounds a connection file's size.
const maxConnectionFile = 64 << 10

// ReadConnectionFile reads and checks a connection file.
func ReadConnectionFile(path string) (ConnectionInfo, error) {
	var ci ConnectionInfo
	f, err := os.Open(path)
	if err != nil {
		return ci, fmt.Errorf("read connection file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxConnectionFile+1))
	if err != nil {
		return ci, fmt.Errorf("read connection file %s: %w", path, err)
	}
	if len(b) > maxConnectionFile {
		return ci, fmt.Errorf("connection file %s is larger than %d bytes", path, maxConnectionFile)
	}
	if err := json.Unmarshal(b, &ci); err != nil {
		return ci, fmt.Errorf("connection file %s: %w", path, err)
	}
	if err := ci.Validate(); err != nil {
		return ci, fmt.Errorf("connection file %s: %w", path, err)
	}
	return ci, nil
}

// Validate checks the transport, address, ports and signature scheme.
func (ci *ConnectionInfo) Validate() error {
	if ci.Transport == "" {
		ci.Transport = "tcp"
	}
	if ci.SignatureScheme == "" {
		ci.SignatureScheme = "hmac-sha256"
	}
	if ci.SignatureScheme != "hmac-sha256" {
		return fmt.Errorf("signature_scheme %q is not supported (hmac-sha256 is)", ci.SignatureScheme)
	}
	switch ci.Transport {
	case "tcp":
		if net.ParseIP(ci.IP) == nil && ci.IP != "localhost" && ci.IP != "*" {
			return fmt.Errorf("ip %q is not an IP address", ci.IP)
		}
		for _, p := range ci.ports() {
			if p.port < 0 || p.port > 65535 {
				return fmt.Errorf("%s %d is not a port", p.name, p.port)
			}
		}
	case "ipc":
		if ci.IP == "" {
			return errors.New("ipc transport without a path in ip")
		}
	default:
		return fmt.Errorf("transport %q is not supported (tcp and ipc are)", ci.Transport)
	}
	return nil
}

type namedPort struct {
	name string
	port int
}

func (ci *ConnectionInfo) ports() []namedPort {
	return []namedPort{{"shell_port", ci.ShellPort}, {"iopub_port", ci.IOPubPort}, {"stdin_port", ci.StdinPort}, {"control_port", ci.ControlPort}, {"hb_port", ci.HBPort}}
}

// endpoint is the zmq4 address of a channel on port, through this
// package's guarded transports. Jupyter's ipc endpoints are the path
// "IP-PORT" (jupyter_client's layout).
func (ci *ConnectionInfo) endpoint(port int) string {
	if ci.Transport == "ipc" {
		return fmt.Sprintf("%s://%s-%d", ipcScheme, ci.IP, port)
	}
	ip := ci.IP
	if ip == "localhost" {
		ip = "127.0.0.1"
	}
	return fmt.Sprintf("%s://%s", tcpScheme, net.JoinHostPort(ip, fmt.Sprint(port)))
}
