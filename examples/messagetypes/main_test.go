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
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{nil, []string{
			"placed o-1 for 1250 pence\n",
			"cancelled o-1: changed my mind\n",
			"  order.cancelled: rejected (the handler reported an unprocessable message: Error: a cancellation names no order)\n",
			`  order.shipped: rejected (the handler reported an unprocessable message: Error: acemq: no handler is registered for type "order.shipped" (registered: "order.cancelled", "order.placed"))` + "\n",
			"shop.orders.dlq holds 2 messages\n",
		}},
		{[]string{"-ignore-unknown"}, []string{
			"ignored order.shipped: {\"id\":\"o-2\",\"carrier\":\"owl\"}\n",
			"  order.shipped: acked\n",
			"shop.orders.dlq holds 1 messages\n",
		}},
	} {
		t.Run(strings.Join(append([]string{"args"}, tc.args...), " "), func(t *testing.T) {
			url := "memory://" + t.Name()
			t.Cleanup(func() { memory.Reset(url) })
			var out bytes.Buffer
			if err := run(context.Background(), append([]string{"-url", url}, tc.args...), &out); err != nil {
				t.Fatalf("%v\n%s", err, out.String())
			}
			for _, want := range tc.want {
				if !strings.Contains(out.String(), want) {
					t.Errorf("the output has no %q:\n%s", want, out.String())
				}
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
		})
	}
}
