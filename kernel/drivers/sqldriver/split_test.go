package sqldriver

import (
	"slices"
	"strings"
	"testing"
)

func TestSplit(t *testing.T) {
	tests := []struct {
		name, cell string
		want       []Statement
	}{
		{"one without semicolon", "SELECT 1", []Statement{{"SELECT 1", 1}}},
		{"two on lines", "SELECT 1;\n\nSELECT 2;\n", []Statement{{"SELECT 1;", 1}, {"SELECT 2;", 3}}},
		{"semicolons in strings and identifiers", "SELECT ';', \"a;b\", [c;d], `e;f` FROM t; SELECT 'it''s;'",
			[]Statement{{"SELECT ';', \"a;b\", [c;d], `e;f` FROM t;", 1}, {"SELECT 'it''s;'", 1}}},
		{"comments", "-- a; comment\nSELECT 1 /* ; */; -- tail;\n/* x;\ny */ SELECT 2",
			[]Statement{{"SELECT 1 /* ; */;", 2}, {"SELECT 2", 4}}},
		{"empty statements", ";;\n; SELECT 1;;", []Statement{{"SELECT 1;", 2}}},
		{"trigger body", "CREATE TRIGGER tr AFTER INSERT ON t BEGIN\n  UPDATE u SET n = n + 1;\n  DELETE FROM v;\nEND;\nSELECT 1;",
			[]Statement{{"CREATE TRIGGER tr AFTER INSERT ON t BEGIN\n  UPDATE u SET n = n + 1;\n  DELETE FROM v;\nEND;", 1}, {"SELECT 1;", 5}}},
		{"temp trigger, lower case", "create temp trigger tr before delete on t begin select 1; end; select 2",
			[]Statement{{"create temp trigger tr before delete on t begin select 1; end;", 1}, {"select 2", 1}}},
		{"END elsewhere is a word", "SELECT CASE WHEN 1 THEN 2 END; SELECT 3",
			[]Statement{{"SELECT CASE WHEN 1 THEN 2 END;", 1}, {"SELECT 3", 1}}},
		{"explain create", "EXPLAIN CREATE TABLE x(a); SELECT 1", []Statement{{"EXPLAIN CREATE TABLE x(a);", 1}, {"SELECT 1", 1}}},
		{"unterminated string runs to the end", "SELECT 'abc;\nSELECT 2;", []Statement{{"SELECT 'abc;\nSELECT 2;", 1}}},
		{"blank and comments only", "  \n-- nothing\n/* here */", nil},
		{"trailing blanks", "SELECT 1  \n\n", []Statement{{"SELECT 1", 1}}},
		{"CRLF", "SELECT 1;\r\nSELECT 2;\r\n", []Statement{{"SELECT 1;", 1}, {"SELECT 2;", 2}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Split(tt.cell); !slices.Equal(got, tt.want) {
				t.Errorf("Split(%q) =\n%+v\nwant\n%+v", tt.cell, got, tt.want)
			}
		})
	}
}

func TestComplete(t *testing.T) {
	tests := []struct {
		cell string
		want bool
	}{
		{"SELECT 1;", true},
		{"SELECT 1", false},
		{"SELECT 1; -- done", true},
		{"SELECT ';'", false},
		{"SELECT 'a;", false},
		{"SELECT 1; /* open", false},
		{"CREATE TRIGGER tr AFTER INSERT ON t BEGIN SELECT 1;", false},
		{"CREATE TRIGGER tr AFTER INSERT ON t BEGIN SELECT 1; END;", true},
		{"", true},
		{"  \n", true},
		{"SELECT [a;", false},
	}
	for _, tt := range tests {
		if got := Complete(tt.cell); got != tt.want {
			t.Errorf("Complete(%q) = %v, want %v", tt.cell, got, tt.want)
		}
	}
}

// FuzzSplit: no panic; the statements are pieces of the cell, in order,
// on the lines where they begin; a cell that Complete accepts splits into
// statements that each end with a semicolon.
func FuzzSplit(f *testing.F) {
	for _, s := range []string{"SELECT 1; SELECT 'a;b' -- c;\n", "CREATE TRIGGER t BEGIN x; END; y", "/*", "'", "[", "\"\"\x80;", "create temp trigger end;"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, cell string) {
		stmts := Split(cell)
		at := 0
		for _, st := range stmts {
			i := strings.Index(cell[at:], st.Text)
			if i < 0 || st.Text == "" {
				t.Fatalf("statement %q is not the next piece of %q", st.Text, cell)
			}
			if line := 1 + strings.Count(cell[:at+i], "\n"); line != st.Line {
				t.Fatalf("statement %q at line %d, said %d", st.Text, line, st.Line)
			}
			at += i + len(st.Text)
		}
		if Complete(cell) {
			for _, st := range stmts {
				if !strings.HasSuffix(st.Text, ";") {
					t.Fatalf("complete cell %q has statement %q without its semicolon", cell, st.Text)
				}
			}
		}
		_ = isComplete(cell, false)
		_ = isComplete(cell, true)
		_ = SplitPG(cell)
		_, _ = cutMagic(cell)
		_ = firstWord(cell)
		_, _, _ = wordAt(cell, len(cell)/2)
	})
}
