package rabbitmq

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/testenv"
)

func uniqueName(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "acemq-test-" + prefix + "-" + hex.EncodeToString(b[:])
}

func ctxFor(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// openTest opens a connection to the test broker, closed at cleanup. It
// returns the concrete connection: tests use the optional interfaces it
// implements, and its internals.
func openTest(t testing.TB, mod func(*driver.Config)) *conn {
	t.Helper()
	cfg := driver.Config{URLs: []string{testenv.AMQPURL(t)}, Name: t.Name()}
	if mod != nil {
		mod(&cfg)
	}
	c, err := open(ctxFor(t, 30*time.Second), cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// tempQueue declares a uniquely named queue, deleted at cleanup.
func tempQueue(t testing.TB, c driver.Conn, q driver.Queue) string {
	t.Helper()
	if q.Name == "" {
		q.Name = uniqueName("q")
	}
	if _, err := c.DeclareQueue(ctxFor(t, 10*time.Second), q); err != nil {
		t.Fatalf("DeclareQueue %s: %v", q.Name, err)
	}
	t.Cleanup(func() { deleteQueue(t, q.Name) })
	return q.Name
}

// deleteQueue deletes a queue on a connection of its own.
func deleteQueue(t testing.TB, name string) {
	onOwnConn(t, "deleting "+name, func(ctx context.Context, c *conn) error {
		_, err := c.DeleteQueue(ctx, name)
		return err
	})
}

// deleteExchange deletes an exchange on a connection of its own.
func deleteExchange(t testing.TB, name string) {
	onOwnConn(t, "deleting "+name, func(ctx context.Context, c *conn) error {
		return c.DeleteExchange(ctx, name)
	})
}

// onOwnConn runs a clean-up step on a connection of its own (the test's
// may be closed or broken by now), logging rather than failing when it
// cannot.
func onOwnConn(t testing.TB, what string, f func(ctx context.Context, c *conn) error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dc, err := open(ctx, driver.Config{URLs: []string{testenv.AMQPURL(t)}, Name: "acemq-test-cleanup"})
	if err != nil {
		t.Logf("cleanup: %v", err)
		return
	}
	defer dc.Close()
	c := dc
	if err := f(ctx, c); err != nil {
		t.Logf("cleanup: %s: %v", what, err)
	}
}
