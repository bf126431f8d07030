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
	want := `billing, from the first event:
  billed o-1: 1250 pence (offset 0)
  checkpoint: offset 3
billing again, from its checkpoint:
  billed o-4: 800 pence (offset 4)
audit, from offset 0:
  0: o-1 placed
  1: o-2 placed
  2: o-3 placed
  3: o-1 shipped
  4: o-4 placed
orders.events.dlq holds 1
orders.events.parked holds 1
`
	if out.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", out.String(), want)
	}
}
