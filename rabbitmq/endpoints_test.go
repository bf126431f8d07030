package rabbitmq

import (
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/testenv"
)

// TestEndpointRounds: a round tries every endpoint once, from where the
// last success left off, nodes whose last dial failed at the end.
func TestEndpointRounds(t *testing.T) {
	e := newEndpoints(3, 1)
	if got := e.round(); !slices.Equal(got, []int{1, 2, 0}) {
		t.Fatalf("first round %v, want [1 2 0]: it starts where asked", got)
	}
	e.dialed(1, true)
	if got := e.round(); !slices.Equal(got, []int{2, 0, 1}) {
		t.Fatalf("after reaching 1 the round is %v, want [2 0 1]: the node just lost goes last", got)
	}
	e.dialed(2, false)
	e.dialed(0, true)
	if got := e.round(); !slices.Equal(got, []int{1, 0, 2}) {
		t.Fatalf("after 2 failed and 0 answered the round is %v, want [1 0 2]: the dead node goes last", got)
	}
	e.dialed(1, false)
	e.dialed(0, false)
	e.dialed(2, true)
	if got := e.round(); !slices.Equal(got, []int{2, 0, 1}) {
		t.Fatalf("after 0 and 1 failed and 2 answered the round is %v, want [2 0 1]: the one that answered, then the dead in ring order", got)
	}
	one := newEndpoints(1, 0)
	one.dialed(0, false)
	if got := one.round(); !slices.Equal(got, []int{0}) {
		t.Fatalf("a single endpoint's round is %v", got)
	}
}

// TestFirstEndpointSpreads: new connections given the same list do not
// all start with its first URL.
func TestFirstEndpointSpreads(t *testing.T) {
	seen := map[int]bool{}
	for range 200 {
		i := firstEndpoint(3)
		if i < 0 || i > 2 {
			t.Fatalf("firstEndpoint(3) = %d", i)
		}
		seen[i] = true
	}
	if len(seen) != 3 {
		t.Fatalf("200 connections started only at %v", seen)
	}
}

func TestEndpointTimeoutApplies(t *testing.T) {
	c := &conn{cfg: driver.Config{URLs: []string{"amqp://a/"}, DialTimeout: 30 * time.Second, EndpointTimeout: time.Second}}
	if got := c.endpointTimeout(); got != 30*time.Second {
		t.Fatalf("one URL: %s, want the dial timeout", got)
	}
	c.cfg.URLs = append(c.cfg.URLs, "amqp://b/")
	if got := c.endpointTimeout(); got != time.Second {
		t.Fatalf("two URLs: %s, want the endpoint timeout", got)
	}
	c.cfg.DialTimeout = 500 * time.Millisecond
	if got := c.endpointTimeout(); got != 500*time.Millisecond {
		t.Fatalf("a dial timeout shorter than the endpoint timeout: %s", got)
	}
	cfg := driver.Config{URLs: []string{"amqp://a/"}}
	if err := checkConfig(&cfg); err != nil || cfg.EndpointTimeout != DefaultEndpointTimeout {
		t.Fatalf("default endpoint timeout %s (%v)", cfg.EndpointTimeout, err)
	}
}

func fixFirstEndpoint(t *testing.T, i int) {
	old := firstEndpoint
	firstEndpoint = func(int) int { return i }
	t.Cleanup(func() { firstEndpoint = old })
}

// silentListener accepts TCP connections and never answers: a node that
// is up at the TCP level but stuck (or an address that swallows packets,
// as far as the AMQP handshake can tell).
func silentListener(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		mu.Lock()
		for _, c := range held {
			_ = c.Close()
		}
		mu.Unlock()
	})
	return ln.Addr().String()
}

// deadAddr is an address where nothing listens: dials are refused.
func deadAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// TestStuckEndpointCostsTheEndpointTimeout: with a node that never answers
// first in the list, Open reaches the broker behind it after the endpoint
// timeout, not the 30 s dial timeout (the context allows 20 s: with the
// dial timeout it would fail), and reports the broker's URL as its
// endpoint.
func TestStuckEndpointCostsTheEndpointTimeout(t *testing.T) {
	fixFirstEndpoint(t, 0)
	good := testenv.AMQPURL(t)
	stuck := "amqp://guest:guest@" + silentListener(t) + "/"
	c, err := open(ctxFor(t, 20*time.Second), driver.Config{
		URLs:            []string{stuck, good},
		Name:            t.Name(),
		EndpointTimeout: 500 * time.Millisecond,
	})
	if err != nil {
		t.Fatalf("Open with a stuck first endpoint: %v", err)
	}
	defer c.Close()
	if got, want := c.Endpoint(), driver.RedactURL(good); got != want {
		t.Fatalf("Endpoint() = %q, want %q", got, want)
	}
	if strings.Contains(c.Endpoint(), ":guest@") {
		t.Fatalf("the endpoint shows the password: %s", c.Endpoint())
	}
	if !strings.Contains(c.String(), driver.RedactURL(good)) {
		t.Fatalf("String() = %q does not name the node it is on", c.String())
	}
}

// TestAllEndpointsFailNamesEach: when every endpoint fails, the error
// names each URL without its password.
func TestAllEndpointsFailNamesEach(t *testing.T) {
	fixFirstEndpoint(t, 0)
	a := "amqp://guest:s3cret@" + deadAddr(t) + "/"
	b := "amqp://guest:s3cret@" + silentListener(t) + "/"
	_, err := open(ctxFor(t, 20*time.Second), driver.Config{URLs: []string{a, b}, EndpointTimeout: 300 * time.Millisecond})
	if err == nil {
		t.Fatal("Open succeeded with no broker")
	}
	msg := err.Error()
	for _, u := range []string{a, b} {
		if !strings.Contains(msg, driver.RedactURL(u)) {
			t.Errorf("the error does not name %s: %s", driver.RedactURL(u), msg)
		}
	}
	if strings.Contains(msg, "s3cret") {
		t.Errorf("the error shows the password: %s", msg)
	}
}

// TestRecoveryMovesToAnotherEndpoint: two "nodes" (proxies to the test
// broker); the one the connection is on dies. The connection recovers on
// the other, says so in its events and Endpoint, and a publish after the
// recovery is confirmed.
func TestRecoveryMovesToAnotherEndpoint(t *testing.T) {
	fastBackoff(t)
	fixFirstEndpoint(t, 0)
	p1, p2 := newProxy(t, nil), newProxy(t, nil)
	var log eventLog
	c := openTest(t, func(cfg *driver.Config) {
		cfg.URLs = []string{p1.url("amqp"), p2.url("amqp")}
		cfg.OnEvent = log.add
	})
	first := driver.RedactURL(p1.url("amqp"))
	if got := c.Endpoint(); got != first {
		t.Fatalf("Endpoint() = %q, want the first URL %q", got, first)
	}
	q := tempQueue(t, c, driver.Queue{Name: uniqueName("ep"), Durable: true})
	p1.close() // the node dies: its connections are cut and it refuses new ones
	testenv.Eventually(t, "the recovery", func() bool { return log.count(driver.EventRecovered) > 0 })
	ctx := ctxFor(t, 30*time.Second)
	if err := c.Publish(ctx, driver.Message{RoutingKey: q, MessageID: "after", Body: []byte("x")}); err != nil {
		t.Fatalf("publish after the node died: %v", err)
	}
	second := driver.RedactURL(p2.url("amqp"))
	if got := c.Endpoint(); got != second {
		t.Fatalf("after recovery Endpoint() = %q, want %q", got, second)
	}
	var lost, recovered driver.Event
	for _, e := range log.all() {
		switch e.Kind {
		case driver.EventLost:
			lost = e
		case driver.EventRecovered:
			recovered = e
		}
	}
	if lost.Endpoint != first || recovered.Endpoint != second {
		t.Fatalf("events name lost=%q recovered=%q, want %q and %q", lost.Endpoint, recovered.Endpoint, first, second)
	}
}
