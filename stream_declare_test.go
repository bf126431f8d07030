package acemq_test

import (
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq"
)

// x-max-age by the family's rule (docs/wire.md §5.9): the largest exact
// unit.
func TestMaxAge(t *testing.T) {
	for d, want := range map[time.Duration]string{
		7 * 24 * time.Hour: "7D", 36 * time.Hour: "36h", 90 * time.Minute: "90m", 45 * time.Second: "45s",
		24 * time.Hour: "1D", 25 * time.Hour: "25h", 61 * time.Second: "61s", time.Hour: "1h", 120 * time.Second: "2m",
	} {
		if got, err := acemq.FormatMaxAge(d); err != nil || got != want {
			t.Errorf("MaxAge(%s) = %q, %v; want %q", d, got, err, want)
		}
	}
	for _, d := range []time.Duration{0, -time.Second, 1500 * time.Millisecond, time.Millisecond} {
		if got, err := acemq.FormatMaxAge(d); err == nil {
			t.Errorf("MaxAge(%s) = %q, want an error", d, got)
		}
	}
}

func TestStreamDeclaration(t *testing.T) {
	plan, err := acemq.NewTopology().Queue("events", acemq.WithQueueType(acemq.QueueStream),
		acemq.WithMaxAge(7*24*time.Hour), acemq.WithMaxLengthBytes(1<<30), acemq.WithMaxSegmentSizeBytes(1<<20)).Plan()
	if err != nil {
		t.Fatal(err)
	}
	q := plan[0].Queue
	if q.Args["x-queue-type"] != "stream" || q.Args["x-max-age"] != "7D" || q.Args["x-max-length-bytes"] != int64(1<<30) ||
		q.Args["x-stream-max-segment-size-bytes"] != int64(1<<20) || !q.Durable || q.Exclusive || q.AutoDelete {
		t.Errorf("stream declaration %+v", q)
	}
	// No segment size unless asked.
	plan, _ = acemq.NewTopology().Queue("events", acemq.WithQueueType(acemq.QueueStream)).Plan()
	if _, ok := plan[0].Queue.Args["x-stream-max-segment-size-bytes"]; ok || len(plan[0].Queue.Args) != 1 {
		t.Errorf("a plain stream declares %v", plan[0].Queue.Args)
	}
	plan, _ = acemq.NewTopology().Queue("work", acemq.WithSingleActiveConsumer()).Plan()
	if args := queueIn(t, plan, "work").Args; args["x-single-active-consumer"] != true || args["x-queue-type"] != "quorum" {
		t.Errorf("single active consumer: %v", args)
	}
	for name, topo := range map[string]*acemq.Topology{
		"max age on a quorum queue":  acemq.NewTopology().Queue("q", acemq.WithMaxAge(time.Hour)),
		"segment size on a classic":  acemq.NewTopology().Queue("q", acemq.WithQueueType(acemq.QueueClassic), acemq.WithMaxSegmentSizeBytes(10)),
		"sub-second max age":         acemq.NewTopology().Queue("q", acemq.WithQueueType(acemq.QueueStream), acemq.WithMaxAge(time.Millisecond)),
		"negative size":              acemq.NewTopology().Queue("q", acemq.WithQueueType(acemq.QueueStream), acemq.WithMaxLengthBytes(-1)),
		"single active on a stream":  acemq.NewTopology().Queue("q", acemq.WithQueueType(acemq.QueueStream), acemq.WithSingleActiveConsumer()),
		"dead-lettering on a stream": acemq.NewTopology().Queue("q", acemq.WithQueueType(acemq.QueueStream), acemq.WithDeadLettering(true)),
		"retry on a stream":          acemq.NewTopology().Queue("q", acemq.WithQueueType(acemq.QueueStream), acemq.WithRetry(acemq.NoRetry())),
		"exclusive stream":           acemq.NewTopology().Queue("q", acemq.WithQueueType(acemq.QueueStream), acemq.WithExclusive()),
		"max age twice":              acemq.NewTopology().Queue("q", acemq.WithQueueType(acemq.QueueStream), acemq.WithMaxAge(time.Hour), acemq.WithArguments(map[string]any{"x-max-age": "2h"})),
		"max age on an exchange":     acemq.NewTopology().Exchange("e", acemq.ExchangeDirect, acemq.WithMaxAge(time.Hour)),
		"single active on a binding": acemq.NewTopology().Bind("e", "q", "k", acemq.WithSingleActiveConsumer()),
	} {
		if err := topo.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		} else if !strings.Contains(err.Error(), "acemq: topology:") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
