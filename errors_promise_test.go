package acemq_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/memory"
	"github.com/acemq/acemq/queues"
	"github.com/acemq/acemq/rabbitmq"
	"github.com/acemq/acemq/topology"
)

// The tests of this file hold the package's documented promises about the
// sentinels its errors wrap, and check that each such error names each
// package it went through once (doc.go, "Errors").

// prefixedOnce fails t unless err's text begins with the first of names
// followed by ": " (the package that returned it: "acemq", "queues") and
// says each of names ("acemq", "rabbitmq", …) followed by ": " exactly
// once.
func prefixedOnce(t *testing.T, what string, err error, names ...string) {
	t.Helper()
	msg := err.Error()
	if !strings.HasPrefix(msg, names[0]+": ") {
		t.Errorf("%s = %q: does not begin with %s:", what, msg, names[0])
	}
	for _, n := range names {
		if c := strings.Count(msg, n+": "); c != 1 {
			t.Errorf("%s = %q: says %s: %d times, want once", what, msg, n, c)
		}
	}
}

// bareScheme is a test transport: bareScheme://NAME is the memory broker
// memory://NAME behind a driver.Conn that has only the core methods: no
// passive checks, no basic.get.
const bareScheme = "acemq-bare"

func init() {
	driver.Register(bareScheme, brokertest.MemoryDriver{Wrap: func(c brokertest.FullConn) driver.Conn { return bareConn{c} }})
}

type bareConn struct{ driver.Conn }

// Inspect and Browse on a driver that cannot do them fail with an error
// wrapping ErrUnsupported (conn.go: "ErrUnsupported is wrapped when the
// connection's driver cannot do what is asked").
func TestUnsupportedWrapsErrUnsupported(t *testing.T) {
	ctx := context.Background()
	name := testenv.Name(t)
	conn, err := acemq.Connect(ctx, bareScheme+"://"+name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(ctx); memory.Reset(name) })
	if _, err := queues.Inspect(ctx, conn, "q"); !errors.Is(err, acemq.ErrUnsupported) {
		t.Errorf("Inspect on a driver without passive checks = %v, want an error wrapping ErrUnsupported", err)
	} else {
		prefixedOnce(t, "Inspect", err, "queues")
	}
	if _, err := queues.Browse(ctx, conn, "q"); !errors.Is(err, acemq.ErrUnsupported) {
		t.Errorf("Browse on a driver without basic.get = %v, want an error wrapping ErrUnsupported", err)
	} else {
		prefixedOnce(t, "Browse", err, "queues")
	}
}

// untakenScheme is a test transport: untakenScheme://NAME is the memory
// broker memory://NAME whose fetched messages cannot be acknowledged, as
// when the channel they were read on went away.
const untakenScheme = "acemq-untaken"

func init() {
	driver.Register(untakenScheme, brokertest.MemoryDriver{Wrap: func(c brokertest.FullConn) driver.Conn { return untakenConn{c} }})
}

type untakenConn struct{ brokertest.FullConn }

func (c untakenConn) Get(ctx context.Context, queue string) (driver.Delivery, bool, error) {
	d, ok, err := c.FullConn.Get(ctx, queue)
	if ok {
		d.Acknowledger = untakenAcker{d.Acknowledger}
	}
	return d, ok, err
}

type untakenAcker struct{ driver.Acknowledger }

func (untakenAcker) Ack(uint64) error { return driver.ErrChannelClosed }

// A Browser.Move whose message was published but could not be taken fails
// with an error wrapping ErrNotTaken, and the cause (browse.go).
func TestMoveNotTakenWrapsErrNotTaken(t *testing.T) {
	ctx := context.Background()
	name := testenv.Name(t)
	conn, err := acemq.Connect(ctx, untakenScheme+"://"+name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(ctx); memory.Reset(name) })
	if err := topology.New().Queue("from").Queue("to").Apply(ctx, conn); err != nil {
		t.Fatal(err)
	}
	if _, err := acemq.NewPublisher[string](conn, "").Send(ctx, "from", "x"); err != nil {
		t.Fatal(err)
	}
	b, err := queues.Browse(ctx, conn, "from")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	m, ok, err := b.Next(ctx)
	if err != nil || !ok {
		t.Fatalf("Next = %v, %v", ok, err)
	}
	err = b.Move(ctx, m, "", "to", m.Envelope)
	if !errors.Is(err, queues.ErrNotTaken) || !errors.Is(err, driver.ErrChannelClosed) {
		t.Fatalf("Move whose take failed = %v, want an error wrapping ErrNotTaken and the cause", err)
	}
	prefixedOnce(t, "Move", err, "queues")
}

// A publish the RabbitMQ driver refuses before sending names each package
// once: "acemq: publishing to exchange …: rabbitmq: nothing was published:
// the message cannot be sent over AMQP 0-9-1: …", and wraps
// rabbitmq.ErrUnsendable.
func TestRabbitMQRefusalNamesEachPackageOnce(t *testing.T) {
	ctx := context.Background()
	conn, err := acemq.Connect(ctx, testenv.AMQPURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(ctx) })
	env, err := acemq.NewEnvelope(acemq.Fields{Headers: map[string]any{"big": strings.Repeat("b", 1<<20)}})
	if err != nil {
		t.Fatal(err)
	}
	q := testenv.Name(t)
	_, err = acemq.NewPublisher[string](conn, "").Send(ctx, q, "x", acemq.WithEnvelope(env))
	if !errors.Is(err, rabbitmq.ErrUnsendable) {
		t.Fatalf("Send with a 1 MB header = %v, want an error wrapping rabbitmq.ErrUnsendable", err)
	}
	prefixedOnce(t, "Send", err, "acemq", "rabbitmq")

	_, err = acemq.Connect(ctx, "amqp://guest:secret@127.0.0.1:5672/%zz")
	if err == nil {
		t.Fatal("Connect to a URL with a malformed vhost succeeded")
	}
	prefixedOnce(t, "Connect", err, "acemq")
	if strings.Contains(err.Error(), "secret") {
		t.Errorf("Connect = %q: shows the password", err)
	}
}

// A consumer whose topology cannot be declared says acemq: once: the
// topology's error names the package already.
func TestConsumeTopologyFailureSaysAcemqOnce(t *testing.T) {
	ctx := context.Background()
	name := testenv.Name(t)
	conn, err := acemq.Connect(ctx, "memory://"+name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(ctx); memory.Reset(name) })
	// The queue exists as a classic queue; the consumer's topology asks for
	// a quorum queue of the same name, which the broker refuses.
	if err := topology.New().Queue("q", topology.WithQueueType(topology.QueueClassic)).Apply(ctx, conn); err != nil {
		t.Fatal(err)
	}
	_, err = acemq.Consume(ctx, conn, "q", func(context.Context, acemq.Message[string]) acemq.Ack { return acemq.Accept() },
		acemq.WithTopology(topology.New().Queue("q", topology.WithQueueType(topology.QueueQuorum))))
	var pe *driver.PreconditionError
	if !errors.As(err, &pe) {
		t.Fatalf("Consume with a topology the broker refuses = %v, want a *driver.PreconditionError", err)
	}
	prefixedOnce(t, "Consume", err, "acemq")
}
