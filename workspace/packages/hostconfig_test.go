package packages

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func fakeEnv(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func fakeFiles(m map[string]string) func(string) ([]byte, error) {
	return func(p string) ([]byte, error) {
		if s, ok := m[p]; ok {
			return []byte(s), nil
		}
		return nil, fs.ErrNotExist
	}
}

func TestHostPipIndex(t *testing.T) {
	tests := []struct {
		name  string
		env   map[string]string
		files map[string]string
		want  string
	}{
		{"nothing", nil, nil, ""},
		{"env wins", map[string]string{"PIP_INDEX_URL": " https://env/simple "},
			map[string]string{"/etc/pip.conf": "[global]\nindex-url = https://etc/simple\n"}, "https://env/simple"},
		{"etc global", nil, map[string]string{"/etc/pip.conf": "[global]\ncert = x\nindex-url = https://etc/simple\n"}, "https://etc/simple"},
		{"user over etc", nil, map[string]string{
			"/etc/pip.conf":                "[global]\nindex-url = https://etc/simple\n",
			"/home/u/.config/pip/pip.conf": "# mine\n[global]\nindex_url: https://user/simple\n",
		}, "https://user/simple"},
		{"xdg config home over legacy", map[string]string{"XDG_CONFIG_HOME": "/xdg"}, map[string]string{
			"/home/u/.pip/pip.conf": "[global]\nindex-url = https://legacy/simple\n",
			"/xdg/pip/pip.conf":     "[global]\nINDEX-URL = https://xdg/simple\n",
			// not read when XDG_CONFIG_HOME is set
			"/home/u/.config/pip/pip.conf": "[global]\nindex-url = https://dotconfig/simple\n",
		}, "https://xdg/simple"},
		{"install over global in any file", nil, map[string]string{
			"/etc/pip.conf":                "[install]\nindex-url = https://etc-install/simple\n",
			"/home/u/.config/pip/pip.conf": "[global]\nindex-url = https://user/simple\n",
		}, "https://etc-install/simple"},
		{"other sections ignored", nil, map[string]string{"/etc/pip.conf": "[download]\nindex-url = https://dl/simple\n; [global]\n"}, ""},
		{"PIP_CONFIG_FILE last", map[string]string{"PIP_CONFIG_FILE": "/cfg"}, map[string]string{
			"/etc/xdg/pip/pip.conf": "[global]\nindex-url = https://xdg-dirs/simple\n",
			"/cfg":                  "[global]\nindex-url = https://cfg/simple\n",
		}, "https://cfg/simple"},
		{"XDG_CONFIG_DIRS", map[string]string{"XDG_CONFIG_DIRS": "/a:/b"}, map[string]string{
			"/a/pip/pip.conf": "[global]\nindex-url = https://a/simple\n",
		}, "https://a/simple"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := hostPipIndex(fakeEnv(tt.env), "/home/u", fakeFiles(tt.files)); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	// The exported function reads the environment and real files.
	if got := HostPipIndex(fakeEnv(map[string]string{"PIP_INDEX_URL": "https://e/simple"}), t.TempDir()); got != "https://e/simple" {
		t.Errorf("HostPipIndex: %q", got)
	}
}

func TestHostNPMRegistry(t *testing.T) {
	tests := []struct {
		name  string
		env   map[string]string
		files map[string]string
		want  string
	}{
		{"nothing", nil, nil, ""},
		{"lower-case env", map[string]string{"npm_config_registry": "https://lower/", "NPM_CONFIG_REGISTRY": "https://upper/"}, nil, "https://lower/"},
		{"upper-case env", map[string]string{"NPM_CONFIG_REGISTRY": "https://upper/"}, nil, "https://upper/"},
		{"npmrc", nil, map[string]string{"/home/u/.npmrc": "fund=false\n# registry=https://comment/\nregistry = \"https://rc/\"\n@x:registry=https://scoped/\n//rc/:_authToken=t\n"}, "https://rc/"},
		{"expanded", map[string]string{"HOST": "mirror"}, map[string]string{"/home/u/.npmrc": "registry=https://${HOST}/npm/\n"}, "https://mirror/npm/"},
		{"userconfig", map[string]string{"NPM_CONFIG_USERCONFIG": "/rc"}, map[string]string{"/rc": "registry=https://userconfig/\n", "/home/u/.npmrc": "registry=https://home/\n"}, "https://userconfig/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := hostNPMRegistry(fakeEnv(tt.env), "/home/u", fakeFiles(tt.files)); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	home := t.TempDir()
	os.WriteFile(filepath.Join(home, ".npmrc"), []byte("registry=https://real/\n"), 0o600)
	if got := HostNPMRegistry(fakeEnv(nil), home); got != "https://real/" {
		t.Errorf("HostNPMRegistry: %q", got)
	}
}
