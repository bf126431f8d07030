package main

import (
	"bytes"
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

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
	if err := run(context.Background(), []string{"-url", url, "-delay", "10ms"}, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	got := out.String()
	for _, want := range []string{
		"policy exponential(4, 10ms, 40ms).waitInBrokerFrom(20ms), waits [10ms 20ms 40ms]\n",
		// pay-1: a wait in the consumer, one on a rung, then charged.
		"pay-1 attempt 1: retried, waiting ",
		"pay-1 attempt 2: retried, waiting 20ms in the broker",
		"pay-1 attempt 3: acked\n",
		// pay-2: fatal, at once.
		"pay-2 attempt 1: rejected (the handler reported an unprocessable message: ",
		// pay-3: out of attempts.
		"pay-3 attempt 3: retried, waiting 40ms in the broker",
		"pay-3 attempt 4: dead_lettered (exhausted 4 attempts: ",
		// The dead-letter queue, browsed: pay-2 and pay-3 with their reasons.
		"payments.dlq holds:\n  pay-2 attempt 1: {\"id\":\"pay-2\"",
		"    the handler reported an unprocessable message: ",
		"  pay-3 attempt 4: {\"id\":\"pay-3\"",
		"    exhausted 4 attempts: ",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the output has no %q:\n%s", want, got)
		}
	}
	if !regexp.MustCompile(`pay-1 attempt 1: retried, waiting \S+ in the consumer`).MatchString(got) {
		t.Errorf("pay-1's first wait was not held in the consumer:\n%s", got)
	}
	if n := strings.Count(got, "\n  pay-"); n != 8+2 {
		t.Errorf("%d settlements and dead letters, want 8 and 2:\n%s", n, got)
	}

	// It deleted what it declared.
	ctx := context.Background()
	conn, err := acemq.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := conn.Close(ctx); err != nil {
			t.Error(err)
		}
	}()
	for _, q := range []string{"payments", "payments.dlq", "payments.parked", contract.RungQueue("payments", 20*time.Millisecond), contract.RungQueue("payments", 40*time.Millisecond)} {
		if _, err := queues.Inspect(ctx, conn, q); !errors.Is(err, acemq.ErrNotFound) {
			t.Errorf("the queue %s is still there after the run (Inspect: %v)", q, err)
		}
	}
}
