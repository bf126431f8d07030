package reliability

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/topology"
)

// The consumer process of TestConsumerKilled is this test binary run again
// with these variables set.
const (
	helperEnv      = "ACEMQ_RELIABILITY_HELPER"
	helperQueueEnv = "ACEMQ_RELIABILITY_QUEUE"
	helperURLEnv   = "ACEMQ_RELIABILITY_URL"
)

// killPolicy is the retry policy both consumers of TestConsumerKilled use:
// the first attempt fails and is retried at once, in the consumer, so that
// the delivery the killed process holds is attempt 2.
var killPolicy = retry.Fixed(3, 10*time.Millisecond)

// TestHelperProcess is not a test: it is the consumer process that
// TestConsumerKilled starts and kills. Without the helper variable it does
// nothing.
func TestHelperProcess(t *testing.T) {
	if os.Getenv(helperEnv) != "blocking-consumer" {
		t.Skip("the consumer process of TestConsumerKilled; runs only when started by it")
	}
	url, queue := os.Getenv(helperURLEnv), os.Getenv(helperQueueEnv)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := acemq.Connect(ctx, url, acemq.WithName("acemq-reliability-doomed-consumer"))
	if err != nil {
		fmt.Printf("ERROR %v\n", err)
		os.Exit(2)
	}
	// The retry republishes attempt 2 and then acknowledges attempt 1; the
	// copy can arrive before that acknowledgement is sent. Attempt 2 waits
	// for attempt 1's settlement, so that the kill finds only attempt 2
	// unsettled (killing in between would, rightly, deliver both again).
	firstSettled := make(chan struct{})
	var once sync.Once
	c.OnSettle(func(s acemq.Settlement) {
		if s.Outcome == acemq.OutcomeRetried && s.SettleErr == nil {
			once.Do(func() { close(firstSettled) })
		}
	})
	_, err = acemq.Consume(ctx, c, queue, func(ctx context.Context, m acemq.Message[payload]) acemq.Ack {
		fmt.Printf("ATTEMPT %s %d %t\n", m.Envelope.ID(), m.Envelope.Attempt(), m.Redelivered)
		if m.Envelope.Attempt() == 1 {
			return acemq.Retry(errors.New("the first attempt fails on purpose"))
		}
		<-firstSettled
		// Signal readiness and block until killed.
		fmt.Printf("READY %s %d\n", m.Envelope.ID(), m.Envelope.Attempt())
		select {}
	}, acemq.WithRetry(killPolicy))
	if err != nil {
		fmt.Printf("ERROR %v\n", err)
		os.Exit(2)
	}
	time.Sleep(2 * time.Minute) // the parent kills the process long before
	fmt.Println("ERROR not killed")
	os.Exit(2)
}

// TestConsumerKilled: a consumer process is killed with SIGKILL while its
// handler holds a message (attempt 2, after a retry). The message is
// delivered again to the next consumer, marked redelivered, with its attempt
// unchanged and its id the same.
func TestConsumerKilled(t *testing.T) {
	url := testenv.AMQPURL(t)
	start := time.Now()
	q := uniqueName("killed")
	deleteQueuesAtCleanup(t, url, q, contract.DeadLetterQueue(q), contract.ParkedQueue(q))
	c := connect(t, url, "acemq-reliability-survivor")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := topology.New().Queue(q).Apply(ctx, c); err != nil {
		t.Fatal(err)
	}
	sent, err := acemq.NewPublisher[payload](c, "").Send(ctx, q, payload{Seq: 7})
	if err != nil {
		t.Fatal(err)
	}

	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"=blocking-consumer", helperQueueEnv+"="+q, helperURLEnv+"="+url)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var attempts []string
	ready := ""
	timeout := time.After(60 * time.Second)
	for ready == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the consumer process ended before it was ready; it said %q", attempts)
			}
			switch {
			case strings.HasPrefix(l, "ATTEMPT "):
				attempts = append(attempts, l)
			case strings.HasPrefix(l, "READY "):
				ready = l
			case strings.HasPrefix(l, "ERROR "):
				t.Fatalf("the consumer process failed: %s", l)
			}
		case <-timeout:
			t.Fatalf("the consumer process was not ready within 60 s; it said %q", attempts)
		}
	}
	want := fmt.Sprintf("READY %s 2", sent.ID())
	if ready != want {
		t.Fatalf("the consumer process is holding %q, want %q (attempts seen: %q)", ready, want, attempts)
	}

	// Attempt 1's settlement was reported; its basic.ack may still wait in
	// the driver to go out with others (docs/consuming.md, "How acks reach
	// the broker"), and an ack not yet sent when a process dies is, rightly,
	// a redelivery. The kill is meant to find only attempt 2 held, so wait
	// until the broker holds no more than that one delivery.
	testenv.RequireCtl(t)
	testenv.Eventually(t, "the broker to hold only attempt 2 of "+q, func() bool {
		n, err := unacknowledged(q)
		if err != nil {
			t.Fatal(err)
		}
		return n == 1
	})
	if err := cmd.Process.Kill(); err != nil { // SIGKILL: no drain, no goodbye
		t.Fatal(err)
	}
	werr := cmd.Wait()
	killed = true
	for range lines { // the pipe is closed; let the reader end
	}
	t.Logf("consumer process killed: %v", werr)

	got := make(chan acemq.Message[payload], 4)
	consumer, err := acemq.Consume(ctx, c, q, func(_ context.Context, m acemq.Message[payload]) acemq.Ack {
		got <- m
		return acemq.Accept()
	}, acemq.WithRetry(killPolicy))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = consumer.Close(context.Background()) }()
	var m acemq.Message[payload]
	select {
	case m = <-got:
	case <-time.After(60 * time.Second):
		t.Fatal("the message held by the killed consumer was not delivered again within 60 s")
	}
	if m.Envelope.ID() != sent.ID() || m.Payload.Seq != 7 {
		t.Errorf("delivered again: id %q seq %d, want %q 7", m.Envelope.ID(), m.Payload.Seq, sent.ID())
	}
	if !m.Redelivered {
		t.Errorf("the message held by the killed consumer came back without the redelivered flag")
	}
	if m.Envelope.Attempt() != 2 {
		t.Errorf("the message came back as attempt %d, want 2 (unchanged)", m.Envelope.Attempt())
	}
	// Nothing else: exactly one copy of the message exists.
	delivered, duplicated := 1, 0
	if pollFor(time.Second, func() bool { return len(got) > 0 }) {
		duplicated = len(got)
		t.Errorf("%d more deliveries after the redelivery: the retry was duplicated", len(got))
	}
	newFigures("consumer-killed").
		add("sent", 1).add("confirmed", 1).add("delivered", delivered).add("lost", 0).add("duplicated", duplicated).
		add("attempts_before_kill", len(attempts)).add("attempt_after", m.Envelope.Attempt()).
		add("redelivered", m.Redelivered).add("time", time.Since(start)).log(t)
}

// unacknowledged is the number of q's deliveries the broker under test
// holds unacknowledged (rabbitmqctl list_queues, current, not sampled).
func unacknowledged(q string) (int, error) {
	out, err := testenv.Ctl("list_queues", "-q", "--no-table-headers", "name", "messages_unacknowledged")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == q {
			var n int
			if _, err := fmt.Sscan(f[1], &n); err != nil {
				return 0, fmt.Errorf("list_queues said %q for %s: %w", f[1], q, err)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("list_queues does not list %s:\n%s", q, out)
}
