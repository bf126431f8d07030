package reliability

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/topology"
)

// restartPolicy holds every wait (1 s) on a broker rung queue.
var restartPolicy = retry.Fixed(3, time.Second).WaitInBrokerFrom(time.Second)

// TestRetrySurvivesRestarts: a message whose retry waits on a broker rung is
// not lost when the consumer that scheduled it stops. Each attempt is seen by
// a new consumer on a new connection, the one before it closed while the
// message sat in the rung; the schedule still finishes: "finishes" is
// accepted on attempt 3, "exhausts" is dead-lettered after attempt 3 with
// the family's reason.
func TestRetrySurvivesRestarts(t *testing.T) {
	t.Run("memory", func(t *testing.T) { retrySurvivesRestarts(t, brokertest.MemoryURL(t)) })
	t.Run("rabbitmq", func(t *testing.T) { retrySurvivesRestarts(t, testenv.AMQPURL(t)) })
}

type seenAttempt struct {
	id          string
	attempt     int
	redelivered bool
}

func retrySurvivesRestarts(t *testing.T, url string) {
	start := time.Now()
	q := uniqueName("retry")
	rung := contract.RungQueue(q, time.Second)
	dlq := contract.DeadLetterQueue(q)
	deleteQueuesAtCleanup(t, url, q, dlq, contract.ParkedQueue(q), rung)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	setup := connect(t, url, "acemq-reliability-retry-setup")
	if err := topology.New().Queue(q, acemq.WithRetry(restartPolicy)).Apply(ctx, setup); err != nil {
		t.Fatal(err)
	}
	pub := acemq.NewPublisher[string](setup, "")
	finishes, err := pub.Send(ctx, q, "finishes")
	if err != nil {
		t.Fatal(err)
	}
	exhausts, err := pub.Send(ctx, q, "exhausts")
	if err != nil {
		t.Fatal(err)
	}

	var (
		mu   sync.Mutex
		seen []seenAttempt
	)
	// One consumer per attempt, each on its own connection.
	for attempt := 1; attempt <= 3; attempt++ {
		c, err := acemq.Connect(ctx, url, acemq.WithName(fmt.Sprintf("acemq-reliability-retry-%d", attempt)))
		if err != nil {
			t.Fatal(err)
		}
		settled := make(chan acemq.Settlement, 4)
		c.OnSettle(func(s acemq.Settlement) { settled <- s })
		consumer, err := acemq.Consume(ctx, c, q, func(_ context.Context, m acemq.Message[string]) acemq.Ack {
			mu.Lock()
			seen = append(seen, seenAttempt{m.Envelope.ID(), m.Envelope.Attempt(), m.Redelivered})
			mu.Unlock()
			if m.Payload == "finishes" && m.Envelope.Attempt() == 3 {
				return acemq.Accept()
			}
			return acemq.Retry(fmt.Errorf("attempt %d of %q fails on purpose", m.Envelope.Attempt(), m.Payload))
		}, acemq.WithRetry(restartPolicy), acemq.WithConcurrency(2))
		if err != nil {
			t.Fatal(err)
		}
		// Both messages settle on this attempt, then the consumer and its
		// connection stop while the retries sit in the rung.
		var got []acemq.Settlement
		timeout := time.After(30 * time.Second)
		for len(got) < 2 {
			select {
			case s := <-settled:
				got = append(got, s)
			case <-timeout:
				t.Fatalf("attempt %d: %d of 2 messages settled within 30 s: %+v", attempt, len(got), got)
			}
		}
		if err := consumer.Close(ctx); err != nil {
			t.Errorf("closing consumer %d: %v", attempt, err)
		}
		if err := c.Close(ctx); err != nil {
			t.Errorf("closing connection %d: %v", attempt, err)
		}
		for _, s := range got {
			want := acemq.OutcomeRetried
			switch {
			case attempt == 3 && s.Envelope.ID() == finishes.ID():
				want = acemq.OutcomeAcked
			case attempt == 3:
				want = acemq.OutcomeDeadLettered
			}
			if s.Outcome != want || s.Envelope.Attempt() != attempt {
				t.Errorf("attempt %d: %s settled %s at attempt %d, want %s (%+v)", attempt, s.Envelope.ID(), s.Outcome, s.Envelope.Attempt(), want, s)
			}
			if want == acemq.OutcomeRetried && (s.Where != acemq.WhereBroker || s.Target != rung) {
				t.Errorf("attempt %d: the retry waited in %q (target %q), want the broker rung %q", attempt, s.Where, s.Target, rung)
			}
		}
		if attempt < 3 {
			// Nobody consumes q now: the retries are in the rung or, once its
			// TTL ran out, back in q. Either way they are on the broker.
			info, err := brokertest.Driver(setup).InspectQueue(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if info.Consumers != 0 {
				t.Errorf("after consumer %d stopped, %s still has %d consumers", attempt, q, info.Consumers)
			}
			r, err := brokertest.Driver(setup).InspectQueue(ctx, rung)
			if err != nil {
				t.Fatal(err)
			}
			if r.Messages+info.Messages != 2 {
				t.Errorf("after consumer %d stopped: %d messages in the rung and %d in the queue, want 2 in all", attempt, r.Messages, info.Messages)
			}
			t.Logf("after consumer %d stopped: %d in the rung, %d back in the queue", attempt, r.Messages, info.Messages)
		}
	}

	// The exhausted message is in the dead-letter queue, with its attempt
	// and the family's reason.
	var dead []string
	poll(t, "the exhausted message in "+dlq, 30*time.Second, func() bool {
		d, ok, err := brokertest.Driver(setup).Get(ctx, dlq)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return false
		}
		_ = d.Ack()
		env := acemq.ReadEnvelope(d.Headers, d.RoutingKey, d.MessageID)
		dead = append(dead, env.ID())
		if env.ID() != exhausts.ID() || env.Attempt() != 3 || !strings.HasPrefix(env.Reason(), "exhausted 3 attempts: ") {
			t.Errorf("dead letter: id %s attempt %d error %q, want %s, 3, exhausted 3 attempts: …", env.ID(), env.Attempt(), env.Reason(), exhausts.ID())
		}
		return true
	})
	// Exactly the expected deliveries: attempts 1, 2, 3 of each message.
	mu.Lock()
	defer mu.Unlock()
	count := map[string][]int{}
	for _, s := range seen {
		count[s.id] = append(count[s.id], s.attempt)
	}
	for _, id := range []string{finishes.ID(), exhausts.ID()} {
		if fmt.Sprint(count[id]) != "[1 2 3]" {
			t.Errorf("message %s was seen at attempts %v, want [1 2 3]", id, count[id])
		}
	}
	if len(seen) != 6 {
		t.Errorf("%d deliveries, want 6: %+v", len(seen), seen)
	}
	scheme, _, _ := strings.Cut(url, ":")
	newFigures("retry-restarts-"+scheme).
		add("sent", 2).add("confirmed", 2).add("delivered", len(count)).add("lost", 2-len(count)).
		add("duplicated", len(seen)-6).add("consumers", 3).add("accepted", 1).add("dead_lettered", len(dead)).
		add("time", time.Since(start)).log(t)
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Error("the scenario ran out of time")
	}
}
