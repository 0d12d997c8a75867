package sqldriver

import (
	"reflect"
	"testing"
)

func TestSplitPG(t *testing.T) {
	for _, tc := range []struct {
		cell string
		want []Statement
	}{
		{"SELECT 1; SELECT 2", []Statement{{"SELECT 1;", 1}, {"SELECT 2", 1}}},
		{"-- c;\nSELECT ';' AS \"a;b\";\n/* x /* nested; */ ; */ SELECT 2;", []Statement{{"SELECT ';' AS \"a;b\";", 2}, {"SELECT 2;", 3}}},
		{"CREATE FUNCTION f() RETURNS int AS $$ BEGIN RETURN 1; END $$ LANGUAGE plpgsql;\nSELECT f();",
			[]Statement{{"CREATE FUNCTION f() RETURNS int AS $$ BEGIN RETURN 1; END $$ LANGUAGE plpgsql;", 1}, {"SELECT f();", 2}}},
		{"SELECT $body$ a; $$ b; $body$;\nSELECT 2", []Statement{{"SELECT $body$ a; $$ b; $body$;", 1}, {"SELECT 2", 2}}},
		{"SELECT E'it\\'s;'; SELECT 'it''s;';", []Statement{{"SELECT E'it\\'s;';", 1}, {"SELECT 'it''s;';", 1}}},
		{"PREPARE p AS SELECT $1; EXECUTE p(1);", []Statement{{"PREPARE p AS SELECT $1;", 1}, {"EXECUTE p(1);", 1}}},
		{"SELECT a$b; ;;", []Statement{{"SELECT a$b;", 1}}},
	} {
		if got := SplitPG(tc.cell); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("SplitPG(%q) = %+v, want %+v", tc.cell, got, tc.want)
		}
	}
	for cell, want := range map[string]bool{
		"SELECT 1;": true, "SELECT 1": false, "": true, "-- x": true, "SELECT 1; -- x": true,
		"SELECT $$;": false, "SELECT 'a;": false, "/* a; /* b */ ;": false, "SELECT 1; /* */": true,
	} {
		if got := CompletePG(cell); got != want {
			t.Errorf("CompletePG(%q) = %v, want %v", cell, got, want)
		}
	}
}

func TestCutMagic(t *testing.T) {
	m, ok := cutMagic("\n  %connect postgres  \nSELECT 1;")
	if !ok || !reflect.DeepEqual(m.args, []string{"postgres"}) || m.lineNo != 2 || m.rest != "\n\nSELECT 1;" {
		t.Fatalf("cutMagic = %+v %v", m, ok)
	}
	if m, ok := cutMagic("%connect"); !ok || len(m.args) != 0 {
		t.Fatalf("cutMagic(%%connect) = %+v %v", m, ok)
	}
	for _, cell := range []string{"SELECT 1;\n%connect postgres", "%connection", "-- %connect postgres"} {
		if _, ok := cutMagic(cell); ok {
			t.Errorf("cutMagic(%q) found a magic", cell)
		}
	}
	if got := positionLine("SELECT\n  1,\n  nope", 16); got != 2 {
		t.Errorf("positionLine = %d", got)
	}
}

func TestCopyStdio(t *testing.T) {
	for text, want := range map[string]bool{
		"COPY t FROM STDIN": true, "copy t (a, b) from stdin with (format csv);": true, "COPY (SELECT 1) TO STDOUT": true,
		"COPY t FROM '/workspace/stdin.csv'": false, "SELECT 'COPY' AS stdin": false, "-- COPY\nSELECT stdin FROM t": false,
		"COPY t TO '/tmp/x' -- STDOUT": false,
	} {
		if got := copyStdio(text); got != want {
			t.Errorf("copyStdio(%q) = %v, want %v", text, got, want)
		}
	}
}
