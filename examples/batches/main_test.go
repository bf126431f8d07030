package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/memory"
	"github.com/acemq/acemq/queues"
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
	got := out.String()
	for _, want := range []string{
		"outcomes:\n  attempt 1: acked\n" +
			"  attempt 1: rejected (the handler reported an unprocessable message: Error: meter m-1: a negative reading (-1 kWh))\n" +
			"  attempt 1: retried (Error: the row lock timed out)\n" +
			"  attempt 2: acked\n",
		"11 readings written\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the output has no %q:\n%s", want, got)
		}
	}
	if n := strings.Count(got, " r-7"); n != 2 {
		t.Errorf("r-7 was in %d batches, want 2 (its retry alone comes back):\n%s", n, got)
	}
	if n := strings.Count(got, " r-4"); n != 1 {
		t.Errorf("r-4 was in %d batches, want 1 (rejected, never retried):\n%s", n, got)
	}

	// It deleted what it declared.
	ctx := context.Background()
	conn, err := acemq.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, q := range []string{queue, contract.DeadLetterQueue(queue), contract.ParkedQueue(queue)} {
		if _, err := queues.Inspect(ctx, conn, q); !errors.Is(err, acemq.ErrNotFound) {
			t.Errorf("the queue %s is still there after the run (Inspect: %v)", q, err)
		}
	}
}
