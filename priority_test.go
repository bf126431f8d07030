package acemq_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/topology"
)

// Per-message priority and expiry on both brokers.

func TestPriorityAndExpiry(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		ctx := context.Background()
		c := brokertest.Connect(t, url)
		t.Run("PriorityOrder", func(t *testing.T) {
			q := testenv.Unique(t, "acemq-prio")
			brokertest.DeleteAtEnd(t, c, q)
			topo := topology.New().Queue(q, topology.WithQueueType(topology.QueueClassic), topology.WithMaxPriority(5))
			if err := topo.Apply(ctx, c); err != nil {
				t.Fatalf("declaring a priority queue: %v", err)
			}
			p := acemq.NewPublisher[string](c, "")
			for _, s := range []struct {
				body string
				prio uint8
			}{{"low", 1}, {"none", 0}, {"top", 9}, {"mid", 3}} {
				var opts []acemq.SendOption
				if s.prio > 0 {
					opts = append(opts, acemq.WithPriority(s.prio))
				}
				if _, err := p.Send(ctx, q, s.body, opts...); err != nil {
					t.Fatal(err)
				}
			}
			var got []string
			for range 4 {
				d := brokertest.Get(t, c, q)
				got = append(got, string(d.Body))
			}
			if strings.Join(got, " ") != `"top" "mid" "low" "none"` {
				t.Errorf("delivered %v, want top, mid, low, none", got)
			}
		})
		// A quorum queue (the default) takes no x-max-priority on any
		// version; RabbitMQ 4 orders it by priority all the same: 4.0
		// in two classes (above 4 is high, delivered ahead of normal,
		// 2 to 1 when both wait), 4.3 strictly highest first. 3.x and
		// memory:// deliver a quorum queue first in, first out.
		t.Run("QuorumQueuePriority", func(t *testing.T) {
			q := testenv.Unique(t, "acemq-qprio")
			brokertest.DeleteAtEnd(t, c, q, contract.DeadLetterQueue(q), contract.ParkedQueue(q))
			if err := topology.New().Queue(q).Apply(ctx, c); err != nil {
				t.Fatal(err)
			}
			p := acemq.NewPublisher[string](c, "")
			for _, s := range []struct {
				body string
				prio uint8
			}{{"n1", 0}, {"n2", 1}, {"n3", 4}, {"hi", 7}} {
				if _, err := p.Send(ctx, q, s.body, acemq.WithPriority(s.prio)); err != nil {
					t.Fatal(err)
				}
			}
			var got []string
			for range 4 {
				d := brokertest.Get(t, c, q)
				got = append(got, string(d.Body))
			}
			major, minor := 0, 0
			if !strings.HasPrefix(url, "memory:") {
				v := testenv.BrokerVersion(t, url)
				major, minor = v.Major, v.Minor
			}
			want := `"n1" "n2" "n3" "hi"`
			switch {
			case major > 4 || major == 4 && minor >= 3:
				// Strictly by priority; a message sent without one
				// (n1: WithPriority(0) sends none) counts as 4.
				want = `"hi" "n1" "n3" "n2"`
			case major == 4:
				want = `"hi" "n1" "n2" "n3"`
			}
			if g := strings.Join(got, " "); g != want {
				t.Errorf("RabbitMQ %d.%d: a quorum queue delivered %s, want %s", major, minor, g, want)
			}
		})
		t.Run("ExpiredIsDeadLettered", func(t *testing.T) {
			q := testenv.Unique(t, "acemq-exp")
			brokertest.DeleteAtEnd(t, c, q, contract.DeadLetterQueue(q), contract.ParkedQueue(q))
			topo := topology.New().Queue(q, topology.WithQueueType(topology.QueueClassic), topology.WithDeadLettering(true))
			if err := topo.Apply(ctx, c); err != nil {
				t.Fatal(err)
			}
			env, err := acemq.NewPublisher[string](c, "").Send(ctx, q, "stale", acemq.WithExpiration(50*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			d := brokertest.Get(t, c, contract.DeadLetterQueue(q))
			if string(d.Body) != `"stale"` || d.MessageID != env.ID() {
				t.Errorf("dead-lettered %q (id %q), want the expired message %s", d.Body, d.MessageID, env.ID())
			}
			deaths, _ := d.Headers["x-death"].([]any)
			if len(deaths) == 0 {
				t.Fatalf("no x-death on the dead letter: %v", d.Headers)
			}
			if first, _ := deaths[0].(map[string]any); first["reason"] != "expired" || first["original-expiration"] != "50" {
				t.Errorf("x-death %v, want reason expired with original-expiration 50", first)
			}
		})
	})
}

func TestSendOptionMistakes(t *testing.T) {
	ctx := context.Background()
	c := brokertest.Connect(t, brokertest.MemoryURL(t))
	_, err := acemq.NewPublisher[string](c, "").Send(ctx, "q", "x", acemq.WithExpiration(-time.Second))
	if err == nil || !strings.Contains(err.Error(), "WithExpiration(-1s)") {
		t.Errorf("a negative expiration: %v, want it refused by name", err)
	}
}

func TestMaxPriorityDeclaration(t *testing.T) {
	q := topology.New().Queue("jobs", topology.WithQueueType(topology.QueueClassic), topology.WithMaxPriority(10))
	plan, err := q.Plan()
	if err != nil {
		t.Fatal(err)
	}
	if got := plan[0].Queue.Args["x-max-priority"]; got != int32(10) {
		t.Errorf("x-max-priority = %#v, want int32(10)", got)
	}
	for name, topo := range map[string]*topology.Topology{
		"quorum":   topology.New().Queue("jobs", topology.WithMaxPriority(10)),
		"zero":     topology.New().Queue("jobs", topology.WithQueueType(topology.QueueClassic), topology.WithMaxPriority(0)),
		"twice":    topology.New().Queue("jobs", topology.WithQueueType(topology.QueueClassic), topology.WithMaxPriority(3), topology.WithArguments(map[string]any{"x-max-priority": 3})),
		"exchange": topology.New().Exchange("jobs", topology.ExchangeDirect, topology.WithMaxPriority(3)),
		"binding":  topology.New().Bind("jobs", "jobs", "k", topology.WithMaxPriority(3)),
	} {
		if err := topo.Validate(); err == nil {
			t.Errorf("%s: WithMaxPriority accepted, want a mistake reported", name)
		}
	}
	// A transient (exclusive) queue is classic without asking.
	if err := topology.New().Queue("jobs", topology.WithDurable(false), topology.WithExclusive(), topology.WithMaxPriority(3)).Validate(); err != nil {
		t.Errorf("a transient priority queue: %v", err)
	}
}
