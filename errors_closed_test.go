package acemq_test

import (
	"context"
	"errors"
	"testing"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/memory"
	"github.com/acemq/acemq/topology"
)

// closingScheme is a test transport: closingScheme://NAME is the memory
// broker memory://NAME whose Consume, once subscribed, waits for the test
// to close the acemq.Conn before it returns, so that Consume finds the
// connection closed after the driver subscribed.
const closingScheme = "acemq-closing"

func init() {
	driver.Register(closingScheme, brokertest.MemoryDriver{Wrap: func(c brokertest.FullConn) driver.Conn { return closingConn{c} }})
}

// closingHooks: entered receives once Consume has subscribed; Consume
// returns once release is closed.
var closingHooks = struct {
	entered chan struct{}
	release chan struct{}
}{}

type closingConn struct{ brokertest.FullConn }

func (c closingConn) Consume(ctx context.Context, spec driver.ConsumeSpec) (driver.Subscription, error) {
	sub, err := c.FullConn.Consume(ctx, spec)
	if err != nil {
		return nil, err
	}
	closingHooks.entered <- struct{}{}
	<-closingHooks.release
	return sub, nil
}

// Consume on a connection that Conn.Close closed while the consumer was
// subscribing fails with an error that wraps ErrClosed, as ErrClosed's
// doc promises for whatever is asked of a closed connection.
func TestConsumeRacingCloseWrapsErrClosed(t *testing.T) {
	ctx := context.Background()
	name := testenv.Name(t)
	t.Cleanup(func() { memory.Reset(name) })
	closingHooks.entered = make(chan struct{}, 1)
	closingHooks.release = make(chan struct{})
	conn, err := acemq.Connect(ctx, closingScheme+"://"+name)
	if err != nil {
		t.Fatal(err)
	}
	if err := topology.New().Queue("q").Apply(ctx, conn); err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() {
		<-closingHooks.entered
		closed <- conn.Close(ctx)
		close(closingHooks.release)
	}()
	_, err = acemq.Consume(ctx, conn, "q", func(context.Context, acemq.Message[string]) acemq.Ack { return acemq.Accept() })
	if cerr := <-closed; cerr != nil {
		t.Fatalf("Close: %v", cerr)
	}
	if !errors.Is(err, acemq.ErrClosed) {
		t.Fatalf("Consume racing Close = %v, want an error wrapping acemq.ErrClosed", err)
	}
}
