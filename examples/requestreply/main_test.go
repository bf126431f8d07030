package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/memory"
	"github.com/acemq/acemq/queues"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRun(t *testing.T) {
	url := "memory://" + t.Name()
	t.Cleanup(func() { memory.Reset(url) })
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-url", url, "-timeout", "50ms"}, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	got := out.String()
	for _, want := range []string{
		"A-1: 250p\n",
		// Refused and failed alike: the caller is told at once.
		`ZZZ: the responder refused: `, `unknown SKU "ZZZ"` + "\n",
		"B-2: the responder failed: ", "the price database is unreachable\n",
		"C-3: no answer within 50ms (rpc.ErrTimeout: true)\n",
		// A-1 and C-3 (late); ZZZ refused; B-2 alone dead-lettered.
		"answered 2, refused 1\n",
		"prices.dlq holds 1 message(s)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the output has no %q:\n%s", want, got)
		}
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
	for _, q := range []string{"prices", "prices.dlq", "prices.parked"} {
		if _, err := queues.Inspect(ctx, conn, q); !errors.Is(err, acemq.ErrNotFound) {
			t.Errorf("the queue %s is still there after the run (Inspect: %v)", q, err)
		}
	}
}
