package sqldriver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTableText(t *testing.T) {
	tab := &Table{
		Columns: []string{"id", "name"},
		Rows: [][]Cell{
			{FormatValue(int64(1), ""), FormatValue("ünï", "")},
			{FormatValue(int64(10), ""), FormatValue(nil, "")},
			{FormatValue(2.5, ""), FormatValue("a\nb", "")},
		},
	}
	want := `┌─────┬──────┐
│ id  │ name │
├─────┼──────┤
│   1 │ ünï  │
│  10 │ NULL │
│ 2.5 │ a\nb │
└─────┴──────┘
3 rows`
	if got := tab.Text(); got != want {
		t.Errorf("Text =\n%s\nwant\n%s", got, want)
	}
	tab.More = 5
	if got := tab.Footer(); got != "8 rows (the first 3 shown, 5 more not shown)" {
		t.Errorf("Footer = %q", got)
	}
	// Wide characters take two columns.
	wide := &Table{Columns: []string{"k"}, Rows: [][]Cell{{FormatValue("日本", "")}, {FormatValue("abcd", "")}}}
	if got := wide.Text(); !strings.Contains(got, "│ 日本 │\n│ abcd │") {
		t.Errorf("wide Text =\n%s", got)
	}
}

func TestTableHTML(t *testing.T) {
	tab := &Table{
		Columns: []string{"<b>c</b>"},
		Rows:    [][]Cell{{FormatValue("<script>alert(1)</script>&", "")}, {FormatValue(nil, "")}, {FormatValue([]byte{0xde, 0xad}, "")}},
	}
	got := tab.HTML()
	for _, want := range []string{"<th>&lt;b&gt;c&lt;/b&gt;</th>", "<td>&lt;script&gt;alert(1)&lt;/script&gt;&amp;</td>", "<td><em>NULL</em></td>", "<td>X&#39;DEAD&#39;</td>", "<p>3 rows</p>"} {
		if !strings.Contains(got, want) {
			t.Errorf("HTML lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "<script>") {
		t.Errorf("HTML has a raw script:\n%s", got)
	}
}

func TestFormatValue(t *testing.T) {
	for _, tt := range []struct {
		v    any
		want string
	}{
		{int64(-3), "-3"}, {1.0, "1.0"}, {0.1 + 0.2, "0.3"}, {1e20, "1.0e+20"}, {1.5e-7, "1.5e-07"},
		{[]byte{1, 2}, "X'0102'"}, {nil, "NULL"}, {"x", "x"},
	} {
		if got := FormatValue(tt.v, "").Text; got != tt.want {
			t.Errorf("FormatValue(%v) = %q, want %q", tt.v, got, tt.want)
		}
	}
	if got := FormatValue(bytes.Repeat([]byte{0xff}, 100), "").Text; !strings.HasSuffix(got, "…' (100 bytes)") {
		t.Errorf("a long blob = %q", got)
	}
}

// FuzzTable: no panic, text/plain lines all the same width, valid UTF-8
// out of any bytes in.
func FuzzTable(f *testing.F) {
	f.Add("a", "b\x00\xff\n\t日本\u200b")
	f.Add("", "")
	f.Fuzz(func(t *testing.T, col, val string) {
		tab := &Table{Columns: []string{col, "x"}, Rows: [][]Cell{{FormatValue(val, ""), FormatValue([]byte(val), "")}}}
		text := tab.Text()
		html := tab.HTML()
		if !utf8.ValidString(text) || !utf8.ValidString(html) {
			t.Fatalf("invalid UTF-8 out of %q %q", col, val)
		}
		lines := strings.Split(text, "\n")
		for _, l := range lines[1 : len(lines)-1] {
			if width(l) != width(lines[0]) {
				t.Fatalf("ragged table for %q %q:\n%s", col, val, text)
			}
		}
	})
}

// TestServeJunk: lines that are no requests, unknown operations and a
// request without its newline get answers or nothing, never a crash; the
// driver ends when the pipe closes.
func TestServeJunk(t *testing.T) {
	var ev bytes.Buffer
	w := &wire{ev: &ev, out: &bytes.Buffer{}}
	d, err := open(":memory:", w)
	if err != nil {
		t.Fatal(err)
	}
	defer d.close()
	in := strings.Join([]string{
		"not json", `{"op":"nope","id":"r1"}`, `[1,2]`, `{"op":"complete","id":"r2","code":"SEL","cursorPos":99}`,
		`{"op":"execute","id":"e1","code":"SELECT 1 AS one; SELECT x'00' AS b"}`,
		`{"op":"isComplete","id":"r3","code":"SELECT 'a"}`, `{"op":"inspect","id":"r4","code":"\u00ff","cursorPos":-5}`,
		`{"op":"variables","id":"r5"}`,
	}, "\n")
	if code := d.serve(strings.NewReader(in)); code != 0 {
		t.Fatalf("serve = %d", code)
	}
	got := map[string]map[string]any{}
	sc := bufio.NewScanner(&ev)
	for sc.Scan() {
		var e map[string]any
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("event %q: %v", sc.Text(), err)
		}
		id, _ := e["id"].(string)
		got[id+"/"+e["ev"].(string)] = e
	}
	if got["r1/reply"]["error"] == nil || got["e1/done"]["status"] != "ok" || got["e1/display"] == nil || got["e1/result"] == nil {
		t.Fatalf("events: %v", got)
	}
	if m := got["r2/reply"]["result"].(map[string]any)["matches"].([]any); len(m) == 0 || m[0] != "SELECT" {
		t.Fatalf("complete SEL: %v", got["r2/reply"])
	}
	if got["r3/reply"]["result"].(map[string]any)["status"] != "incomplete" || got["r5/reply"]["result"] == nil {
		t.Fatalf("events: %v", got)
	}
}
