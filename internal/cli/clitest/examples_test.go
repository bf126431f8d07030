package clitest

import (
	"fmt"
	"testing"
)

func TestShellSplit(t *testing.T) {
	got, err := shellSplit(`  echo '{"a": 1}' | acemq ask --exchange "" --token "$T" -- tr a\ b`)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"echo", `{"a": 1}`}, {"acemq", "ask", "--exchange", "", "--token", "$T", "--", "tr", "a b"}}
	if fmt.Sprint(got) != fmt.Sprint(want) || len(got[1]) != len(want[1]) {
		t.Errorf("shellSplit = %q, want %q", got, want)
	}
}
