package driverio

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestReadLine(t *testing.T) {
	r := bufio.NewReaderSize(strings.NewReader("a\n"+strings.Repeat("b", 100)+"\n  \nlast"), 16)
	for _, want := range []string{"a\n", strings.Repeat("b", 100) + "\n", "  \n", "last"} {
		line, err := ReadLine(r)
		if err != nil || string(line) != want {
			t.Fatalf("ReadLine = %q, %v; want %q", line, err, want)
		}
	}
	if line, err := ReadLine(r); !errors.Is(err, io.EOF) || len(line) != 0 {
		t.Fatalf("at the end: %q, %v", line, err)
	}
}

func TestReadLineTooLong(t *testing.T) {
	defer func(n int) { maxLine = n }(maxLine)
	maxLine = 1000
	r := bufio.NewReaderSize(strings.NewReader(strings.Repeat("x", 1000)+"y\n"), 16)
	if _, err := ReadLine(r); !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("a line over MaxLine: %v", err)
	}
}
