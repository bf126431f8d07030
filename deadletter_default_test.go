package acemq_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/topology"
)

// A quorum queue gets the dead-letter half by default: RabbitMQ 4 drops a
// message over a quorum queue's delivery limit when the queue has nowhere
// to dead-letter to.
func TestQuorumQueuesDeadLetterByDefault(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []topology.Option
		dlx  any // the x-dead-letter-exchange wanted, nil for none
		half bool
	}{
		{"default quorum", nil, contract.DeadLetterExchange, true},
		{"opted out", []topology.Option{topology.WithDeadLettering(false)}, nil, false},
		{"explicit", []topology.Option{topology.WithDeadLettering(true)}, contract.DeadLetterExchange, true},
		{"classic", []topology.Option{topology.WithQueueType(topology.QueueClassic)}, nil, false},
		{"classic asked", []topology.Option{topology.WithQueueType(topology.QueueClassic), topology.WithDeadLettering(true)}, contract.DeadLetterExchange, true},
		{"exclusive", []topology.Option{topology.WithExclusive(), topology.WithDurable(false)}, nil, false},
		{"stream", []topology.Option{topology.WithQueueType(topology.QueueStream)}, nil, false},
		{"own dead-letter exchange", []topology.Option{topology.WithArguments(map[string]any{"x-dead-letter-exchange": "mine"})}, "mine", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := topology.New().Queue("orders", tc.opts...).Plan()
			if err != nil {
				t.Fatal(err)
			}
			args := queueIn(t, plan, "orders").Args
			if args["x-dead-letter-exchange"] != tc.dlx {
				t.Errorf("x-dead-letter-exchange %#v, want %#v", args["x-dead-letter-exchange"], tc.dlx)
			}
			if tc.half && args["x-dead-letter-routing-key"] != "orders.dlq" {
				t.Errorf("x-dead-letter-routing-key %#v, want orders.dlq", args["x-dead-letter-routing-key"])
			}
			hasDLQ := strings.Contains(plan.String(), "queue orders.dlq ")
			if hasDLQ != tc.half {
				t.Errorf("the plan declares orders.dlq: %v, want %v:\n%s", hasDLQ, tc.half, plan)
			}
		})
	}
	err := topology.New().Queue("orders", topology.WithDeadLettering(true), topology.WithArguments(map[string]any{"x-dead-letter-exchange": "mine"})).Validate()
	if err == nil || !strings.Contains(err.Error(), "already sets x-dead-letter-exchange") {
		t.Errorf("WithDeadLettering(true) over an argument of the caller's: %v", err)
	}
}

func TestDeadLetterDefaultUpgradeMemory(t *testing.T) {
	testDeadLetterDefaultUpgrade(t, memoryBackendLogged)
}

func TestDeadLetterDefaultUpgradeRabbitMQ(t *testing.T) {
	testenv.AMQPURL(t)
	testDeadLetterDefaultUpgrade(t, rabbitBackendLogged)
}

// A backend whose connection logs into a buffer.
type loggedBackend func(t *testing.T, log *bytes.Buffer) *acemq.Conn

var memoryBackendLogged loggedBackend = func(t *testing.T, log *bytes.Buffer) *acemq.Conn {
	return openLogged(t, brokertest.MemoryURL(t), log)
}

var rabbitBackendLogged loggedBackend = func(t *testing.T, log *bytes.Buffer) *acemq.Conn {
	return openLogged(t, testenv.AMQPURL(t), log)
}

func openLogged(t *testing.T, url string, log *bytes.Buffer) *acemq.Conn {
	c, err := acemq.Connect(context.Background(), url, acemq.WithLogger(slog.New(slog.NewTextHandler(log, nil))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// testDeadLetterDefaultUpgrade: a quorum queue declared before quorum
// queues got the dead-letter arguments by default (a plain quorum queue)
// still applies: the broker would refuse the new arguments (406
// PRECONDITION_FAILED, inequivalent arg), so Apply declares it as it is and
// warns. Asked for explicitly, the same difference is an error.
func testDeadLetterDefaultUpgrade(t *testing.T, open loggedBackend) {
	ctx := context.Background()
	var log bytes.Buffer
	c := open(t, &log)
	q := testenv.Unique(t, "acemq-legacy")
	tr := brokertest.Driver(c)
	t.Cleanup(func() {
		for _, n := range []string{q, contract.DeadLetterQueue(q), contract.ParkedQueue(q)} {
			_, _ = tr.DeleteQueue(context.Background(), n)
		}
	})
	if _, err := tr.DeclareQueue(ctx, driver.Queue{Name: q, Durable: true, Args: driver.Table{"x-queue-type": "quorum"}}); err != nil {
		t.Fatal(err)
	}
	if err := topology.New().Queue(q).Apply(ctx, c); err != nil {
		t.Fatalf("applying the default over a plain quorum queue: %v", err)
	}
	if !strings.Contains(log.String(), "exists without a dead-letter exchange") || !strings.Contains(log.String(), q) {
		t.Errorf("no warning logged; the log holds:\n%s", log.String())
	}
	// The dead-letter half was still declared: a consumer's set-asides work.
	if _, err := tr.InspectQueue(ctx, contract.DeadLetterQueue(q)); err != nil {
		t.Errorf("inspecting %s: %v", contract.DeadLetterQueue(q), err)
	}
	// The connection still works after the refused declaration.
	if _, err := tr.InspectQueue(ctx, q); err != nil {
		t.Fatalf("inspecting %s after the fallback: %v", q, err)
	}
	err := topology.New().Queue(q, topology.WithDeadLettering(true)).Apply(ctx, c)
	var pe *driver.PreconditionError
	if !errors.As(err, &pe) || !strings.Contains(pe.Detail, "x-dead-letter-exchange") {
		t.Errorf("WithDeadLettering(true) over a plain quorum queue: %v; want a *driver.PreconditionError naming x-dead-letter-exchange", err)
	}
	// Another difference is not tolerated.
	err = topology.New().Queue(q, topology.WithQueueType(topology.QueueClassic)).Apply(ctx, c)
	if !errors.As(err, &pe) {
		t.Errorf("a classic declaration over a quorum queue: %v; want a *driver.PreconditionError", err)
	}
}
