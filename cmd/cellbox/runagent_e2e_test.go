package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunAgent: `cellbox run-agent` runs a command in a terminal of the
// project's workspace over the user's daemon: what it writes and deletes
// lands in the overlay (the project is untouched, the review commands see
// it), it gets the variables asked for and the proxy of its allowlist,
// and its exit code is the command's.
func TestRunAgent(t *testing.T) {
	d := startReviewDaemon(t)
	project := t.TempDir()
	if err := os.WriteFile(filepath.Join(project, "keep.txt"), []byte("keep\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d.env = append(d.env, "AGENT_TOKEN=secret-for-the-agent")
	r := d.cellbox(t, project, "run-agent", "--allow", "example.com", "--env", "AGENT_TOKEN", "--env", "MODE=test", "--",
		"sh", "-c", `echo edited > agent.txt; rm keep.txt; echo "token=$AGENT_TOKEN mode=$MODE proxy=${HTTPS_PROXY:+set}"; exit 3`)
	if r.code != 3 {
		t.Fatalf("run-agent: exit %d, stdout %q, stderr %q; want the command's 3", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "token=secret-for-the-agent mode=test proxy=set") {
		t.Fatalf("the agent's output %q lacks its variables or its proxy", r.stdout)
	}
	if !strings.Contains(r.stderr, "it may reach example.com") || !strings.Contains(r.stderr, "2 changes in the workspace") {
		t.Fatalf("run-agent's messages: %q", r.stderr)
	}
	if _, ok := readFile(t, filepath.Join(project, "agent.txt")); ok {
		t.Fatal("the agent's file reached the project")
	}
	if s, _ := readFile(t, filepath.Join(project, "keep.txt")); s != "keep\n" {
		t.Fatalf("the project's keep.txt is %q after the agent deleted it in the workspace", s)
	}
	d.cellbox(t, project, "changes").want(t, "cellbox changes after run-agent", 0, "A agent.txt\nD keep.txt\n")

	// A command that ends at once (its exit may come before pty/open's
	// answer): its status, every time.
	for i := 0; i < 5; i++ {
		if r := d.cellbox(t, project, "run-agent", "--", "sh", "-c", "echo quick; exit 7"); r.code != 7 || !strings.Contains(r.stdout, "quick") {
			t.Fatalf("run-agent of a quick command: %+v", r)
		}
	}

	// No command: a usage error.
	if r := d.cellbox(t, project, "run-agent"); r.code != 2 || !strings.Contains(r.stderr, "give the agent's command after --") {
		t.Fatalf("run-agent without a command: %+v", r)
	}
}

// TestAgentNetworkAndEnv: a known agent's API host and key variable come
// without flags; --allow and --env add to them.
func TestAgentNetworkAndEnv(t *testing.T) {
	env := map[string]string{"ANTHROPIC_API_KEY": "k", "TERM": "xterm", "OTHER": "o", "UNRELATED": "u"}
	allow, got := agentNetworkAndEnv("/usr/local/bin/claude", []string{"pypi.org", "api.anthropic.com"}, []string{"OTHER", "X=1"}, func(k string) string { return env[k] })
	if strings.Join(allow, " ") != "api.anthropic.com statsig.anthropic.com pypi.org" {
		t.Errorf("allow = %q", allow)
	}
	if len(got) != 4 || got["ANTHROPIC_API_KEY"] != "k" || got["TERM"] != "xterm" || got["OTHER"] != "o" || got["X"] != "1" {
		t.Errorf("env = %v", got)
	}
	if allow, _ := agentNetworkAndEnv("mytool", nil, nil, func(string) string { return "" }); len(allow) != 0 {
		t.Errorf("an unknown command got hosts %q", allow)
	}
}
