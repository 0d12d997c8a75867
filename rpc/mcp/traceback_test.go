package mcp

import (
	"strings"
	"testing"

	"github.com/cellbox-dev/cellbox/protocol"
)

func TestCleanErrorPython(t *testing.T) {
	tb := []string{
		"\x1b[31mTraceback (most recent call last):\x1b[0m",
		`  File "<cell-4>", line 3, in <module>`,
		"    test_calc.test_add()",
		`  File "/workspace/tests/test_calc.py", line 4, in test_add`,
		"    assert add(2, 3) == 5",
		"           ^^^^^^^^^",
		`  File "/workspace/src/calc.py", line 2, in add`,
		"    return helper(a) - b",
		`  File "/usr/lib/python3/dist-packages/numpy/core/x.py", line 10, in helper`,
		"    return np.thing(a)",
		`  File "/usr/lib/python3/dist-packages/numpy/core/y.py", line 20, in thing`,
		"    raise ValueError('bad')",
		`  File "/usr/lib/python3/dist-packages/numpy/core/z.py", line 30, in raiser`,
		"    raise ValueError('bad')",
		"ValueError: bad",
	}
	e := cleanError(&protocol.ExecuteError{Ename: "ValueError", Evalue: "bad", Traceback: tb}, 8<<10)
	if e.Location != "src/calc.py:2" {
		t.Errorf("location %q, want src/calc.py:2 (the innermost frame of the user's code)", e.Location)
	}
	want := strings.Join([]string{
		"Traceback (most recent call last):",
		`  File "<cell-4>", line 3, in <module>`,
		"    test_calc.test_add()",
		`  File "tests/test_calc.py", line 4, in test_add`,
		"    assert add(2, 3) == 5",
		"           ^^^^^^^^^",
		`  File "src/calc.py", line 2, in add`,
		"    return helper(a) - b",
		"  [2 frames of library code omitted]",
		`  File "/usr/lib/python3/dist-packages/numpy/core/z.py", line 30, in raiser`,
		"    raise ValueError('bad')",
		"ValueError: bad",
	}, "\n")
	if e.Traceback != want {
		t.Errorf("traceback:\n%s\nwant:\n%s", e.Traceback, want)
	}
}

func TestCleanErrorChainedAndNoUserFrames(t *testing.T) {
	tb := []string{
		"Traceback (most recent call last):\n" +
			`  File "/usr/lib/python3.11/json/decoder.py", line 353, in raw_decode` + "\n" +
			"    obj, end = self.scan_once(s, idx)\n" +
			"StopIteration: 0\n" +
			"\n" +
			"During handling of the above exception, another exception occurred:\n" +
			"\n" +
			"Traceback (most recent call last):\n" +
			`  File "<cell-1>", line 2, in <module>` + "\n" +
			"    json.loads('')\n" +
			`  File "/usr/lib/python3.11/json/__init__.py", line 346, in loads` + "\n" +
			"    return _default_decoder.decode(s)\n" +
			`  File "/usr/lib/python3.11/json/decoder.py", line 355, in raw_decode` + "\n" +
			"    raise JSONDecodeError(\"Expecting value\", s, err.value) from None\n" +
			"json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)",
	}
	e := cleanError(&protocol.ExecuteError{Ename: "JSONDecodeError", Traceback: tb}, 8<<10)
	if e.Location != "<cell-1>:2" {
		t.Errorf("location %q", e.Location)
	}
	for _, want := range []string{"During handling", "[1 frame of library code omitted]\n", `json/decoder.py", line 355`, "JSONDecodeError: Expecting value"} {
		if !strings.Contains(e.Traceback, want) {
			t.Errorf("traceback lacks %q:\n%s", want, e.Traceback)
		}
	}
	if strings.Contains(e.Traceback, "json/__init__.py") {
		t.Errorf("a library frame in the middle stayed:\n%s", e.Traceback)
	}

	lib := []string{"Traceback (most recent call last):", `  File "/usr/lib/x.py", line 1, in f`, "    g()", "KeyError: 'k'"}
	e = cleanError(&protocol.ExecuteError{Ename: "KeyError", Traceback: lib}, 8<<10)
	if e.Location != "" || e.Traceback != strings.Join(lib, "\n") {
		t.Errorf("without a frame of the user's the traceback is kept: %+v", e)
	}
}

func TestCleanErrorJavaScript(t *testing.T) {
	tb := []string{
		"TypeError: Cannot read properties of undefined (reading 'x')",
		"    at parse (/workspace/src/parse.js:12:9)",
		"    at Array.map (<anonymous>)",
		"    at main (/workspace/src/main.js:3:14)",
		"    at Module._compile (node:internal/modules/cjs/loader:1554:14)",
		"    at node:internal/main/run_main_module:28:49",
	}
	e := cleanError(&protocol.ExecuteError{Ename: "TypeError", Traceback: tb}, 8<<10)
	if e.Location != "src/parse.js:12" {
		t.Errorf("location %q, want src/parse.js:12", e.Location)
	}
	if !strings.Contains(e.Traceback, "at parse (src/parse.js:12:9)") || strings.Contains(e.Traceback, "node:internal") {
		t.Errorf("traceback:\n%s", e.Traceback)
	}
}
