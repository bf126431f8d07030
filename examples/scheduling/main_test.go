package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/acemq/acemq/memory"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRun(t *testing.T) {
	url := "memory://" + t.Name()
	t.Cleanup(func() { memory.Reset(url) })
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-url", url}, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	want := `scheduled i-1 for -60.0s
scheduled i-2 for +1.5s
scheduled i-3 for +3.0s
delivered i-1: same id true, attempt 1
delivered i-2: same id true, attempt 1
delivered i-3: same id true, attempt 1
`
	if out.String() != want {
		t.Errorf("output\n%s\nwant\n%s", out.String(), want)
	}
}
