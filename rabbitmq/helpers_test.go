package rabbitmq

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/acemq/acemq/driver"
)

// testURL returns the broker URL from ACEMQ_TEST_AMQP_URL or skips the test.
func testURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv("ACEMQ_TEST_AMQP_URL")
	if u == "" {
		t.Skip("ACEMQ_TEST_AMQP_URL is not set; skipping a test that needs RabbitMQ")
	}
	return u
}

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

// openTest opens a connection to the test broker, closed at cleanup.
func openTest(t testing.TB, mod func(*driver.Config)) driver.Conn {
	t.Helper()
	cfg := driver.Config{URLs: []string{testURL(t)}, Name: t.Name()}
	if mod != nil {
		mod(&cfg)
	}
	c, err := Open(ctxFor(t, 30*time.Second), cfg)
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
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Open(ctx, driver.Config{URLs: []string{testURL(t)}, Name: "acemq-test-cleanup"})
	if err != nil {
		t.Logf("cleanup: %v", err)
		return
	}
	defer c.Close()
	if _, err := c.DeleteQueue(ctx, name); err != nil {
		t.Logf("cleanup: deleting %s: %v", name, err)
	}
}

func deleteExchange(t testing.TB, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Open(ctx, driver.Config{URLs: []string{testURL(t)}, Name: "acemq-test-cleanup"})
	if err != nil {
		t.Logf("cleanup: %v", err)
		return
	}
	defer c.Close()
	if err := c.DeleteExchange(ctx, name); err != nil {
		t.Logf("cleanup: deleting %s: %v", name, err)
	}
}
