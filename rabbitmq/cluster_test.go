package rabbitmq

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/clustertest"
)

// TestClusterDeadEndpointFirst: the first URL of the list names a node
// that is down, either stopped (its port refuses connections) or
// black-holed (iptables drops every packet to its AMQP port, so a dial
// gets no answer at all). Open, made to start at that URL, reaches the
// next node after at most the endpoint timeout (the default, 5 s), never
// the 30 s dial timeout; the connection names the node it is on. Each
// case connects 5 times and logs the times.
func TestClusterDeadEndpointFirst(t *testing.T) {
	nodes := clustertest.Nodes(t)
	t.Cleanup(func() { clustertest.Restore(t, nodes) })
	dead := nodes[0]
	urls := []string{nodes[0].URL, nodes[1].URL, nodes[2].URL}
	fixFirstEndpoint(t, 0)

	measure := func(t *testing.T, kind string) {
		var times []time.Duration
		for range 5 {
			start := time.Now()
			c, err := open(ctxFor(t, 25*time.Second), driver.Config{URLs: urls, Name: t.Name()})
			took := time.Since(start)
			if err != nil {
				t.Fatalf("Open with %s first in the list: %v", dead, err)
			}
			at, _ := clustertest.NodeAt(nodes, c.Endpoint())
			_ = c.Close()
			if at.N == dead.N || at.N == 0 {
				t.Fatalf("the connection is on %q, want a live node", c.Endpoint())
			}
			times = append(times, took)
		}
		slices.Sort(times)
		// Bounded by the endpoint timeout plus the live node's handshake;
		// 15 s is far below the 30 s the dial timeout would have cost.
		if max := times[len(times)-1]; max > DefaultEndpointTimeout+10*time.Second {
			t.Errorf("connecting took up to %s with %s first, want it bounded by the endpoint timeout %s", max, dead, DefaultEndpointTimeout)
		}
		t.Logf("RESULT scenario=dead-endpoint-first dead=%s kind=%s connects=%d endpoint_timeout=%s min=%.2fs median=%.2fs max=%.2fs",
			dead, kind, len(times), DefaultEndpointTimeout, times[0].Seconds(), times[len(times)/2].Seconds(), times[len(times)-1].Seconds())
	}

	t.Run("stopped", func(t *testing.T) {
		if err := dead.Stop(); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := dead.Start(); err != nil {
				t.Error(err)
			}
		}()
		measure(t, "stopped")
	})
	t.Run("black-holed", func(t *testing.T) {
		clustertest.Iptables(t)
		heal := clustertest.BlackHole(t, dead)
		defer heal()
		measure(t, "black-holed")
		// Reconnecting: the node the connection is on is stopped; the
		// black-holed node failed its last dial and is tried last, so
		// the connection recovers on the third node without waiting for
		// the dead one.
		fastBackoff(t)
		var log eventLog
		c, err := open(ctxFor(t, 25*time.Second), driver.Config{URLs: urls, Name: t.Name(), OnEvent: log.add})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		on, _ := clustertest.NodeAt(nodes, c.Endpoint())
		stopAt := time.Now()
		if err := on.Stop(); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := on.Start(); err != nil {
				t.Error(err)
			}
		}()
		deadline := time.Now().Add(30 * time.Second)
		for log.count(driver.EventRecovered) == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("no recovery within 30 s of stopping %s: events %+v", on, log.all())
			}
			time.Sleep(20 * time.Millisecond)
		}
		took := time.Since(stopAt)
		at, _ := clustertest.NodeAt(nodes, c.Endpoint())
		if at.N == dead.N || at.N == on.N {
			t.Fatalf("recovered on %q", c.Endpoint())
		}
		t.Logf("RESULT scenario=dead-endpoint-reconnect dead=%s stopped=%s recovered_on=%s since_stop_app=%s", dead, on, at, fmt.Sprintf("%.2fs", took.Seconds()))
	})
}
