package schedule

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/testenv"
)

// TestFaultControlConsumerConnectionKilled: the broker closes the control
// consumer's connection (and only it) while messages are hopping and
// falling due. Once it has recovered, every message is delivered, with
// the id it was scheduled under (a hop in flight may deliver one twice).
func TestFaultControlConsumerConnectionKilled(t *testing.T) {
	testenv.Faults(t)
	url := testenv.AMQPURL(t)
	ctx := context.Background()
	name := testenv.Unique(t, "acemq-sched-fault")
	ctrl := brokertest.Connect(t, url, acemq.WithName(name))
	c, _ := connect(t, url)
	l := fastLadder(t, c, 20)
	tg := newTarget(t, c)
	serve(t, ctrl, ladderOption{l})
	p := NewPublisher[order](c, "", ladderOption{l})
	const n = 60
	ids := map[string]bool{}
	for i := range n {
		// Due from 0.1 s to 1.05 s from now: through the 10s and 1s rungs.
		env, err := p.SendAfter(ctx, tg.q, time.Duration(i%20+2)*time.Second/20, orderID(i))
		if err != nil {
			t.Fatal(err)
		}
		ids[env.ID()] = true
	}
	time.Sleep(300 * time.Millisecond) // some delivered, some hopping, some waiting
	closeConnection(t, name)
	deadline := time.Now().Add(testenv.Patience)
	for {
		got, _ := tg.wait(t, 0)
		seen := map[string]bool{}
		for _, m := range got {
			if !ids[m.Envelope.ID()] {
				t.Fatalf("delivered %s, which was never scheduled", m.Envelope.ID())
			}
			seen[m.Envelope.ID()] = true
		}
		if len(seen) == n {
			t.Logf("%d delivered, %d deliveries", n, len(got))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d scheduled messages delivered after the control consumer's connection was closed", len(seen), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// closeConnection has the broker close the connection named name (the
// client's connection_name), and no other.
func closeConnection(t *testing.T, name string) {
	t.Helper()
	testenv.RequireCtl(t)
	out, err := testenv.Ctl("list_connections", "pid", "client_properties")
	if err != nil {
		t.Fatalf("%v", err)
	}
	pid := regexp.MustCompile(`^<[^>]+>`)
	closed := 0
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, `"`+name+`"`) {
			if p := pid.FindString(line); p != "" && testenv.Rabbitmqctl(t, "close_connection", p, "schedule fault test") {
				closed++
			}
		}
	}
	if closed == 0 {
		t.Fatalf("no connection named %s to close:\n%s", name, out)
	}
}
