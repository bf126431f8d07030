package acemq_test

import (
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/topology"
)

func TestStreamDeclaration(t *testing.T) {
	plan, err := topology.New().Queue("events", topology.WithQueueType(topology.QueueStream),
		topology.WithMaxAge(7*24*time.Hour), topology.WithMaxLengthBytes(1<<30), topology.WithMaxSegmentSizeBytes(1<<20)).Plan()
	if err != nil {
		t.Fatal(err)
	}
	q := plan[0].Queue
	if q.Args["x-queue-type"] != "stream" || q.Args["x-max-age"] != "7D" || q.Args["x-max-length-bytes"] != int64(1<<30) ||
		q.Args["x-stream-max-segment-size-bytes"] != int64(1<<20) || !q.Durable || q.Exclusive || q.AutoDelete {
		t.Errorf("stream declaration %+v", q)
	}
	// No segment size unless asked.
	plan, _ = topology.New().Queue("events", topology.WithQueueType(topology.QueueStream)).Plan()
	if _, ok := plan[0].Queue.Args["x-stream-max-segment-size-bytes"]; ok || len(plan[0].Queue.Args) != 1 {
		t.Errorf("a plain stream declares %v", plan[0].Queue.Args)
	}
	plan, _ = topology.New().Queue("work", topology.WithSingleActiveConsumer()).Plan()
	if args := queueIn(t, plan, "work").Args; args["x-single-active-consumer"] != true || args["x-queue-type"] != "quorum" {
		t.Errorf("single active consumer: %v", args)
	}
	for name, topo := range map[string]*topology.Topology{
		"max age on a quorum queue":  topology.New().Queue("q", topology.WithMaxAge(time.Hour)),
		"segment size on a classic":  topology.New().Queue("q", topology.WithQueueType(topology.QueueClassic), topology.WithMaxSegmentSizeBytes(10)),
		"sub-second max age":         topology.New().Queue("q", topology.WithQueueType(topology.QueueStream), topology.WithMaxAge(time.Millisecond)),
		"negative size":              topology.New().Queue("q", topology.WithQueueType(topology.QueueStream), topology.WithMaxLengthBytes(-1)),
		"single active on a stream":  topology.New().Queue("q", topology.WithQueueType(topology.QueueStream), topology.WithSingleActiveConsumer()),
		"dead-lettering on a stream": topology.New().Queue("q", topology.WithQueueType(topology.QueueStream), topology.WithDeadLettering(true)),
		"retry on a stream":          topology.New().Queue("q", topology.WithQueueType(topology.QueueStream), acemq.WithRetry(retry.None())),
		"exclusive stream":           topology.New().Queue("q", topology.WithQueueType(topology.QueueStream), topology.WithExclusive()),
		"max age twice":              topology.New().Queue("q", topology.WithQueueType(topology.QueueStream), topology.WithMaxAge(time.Hour), topology.WithArguments(map[string]any{"x-max-age": "2h"})),
		"max age on an exchange":     topology.New().Exchange("e", topology.ExchangeDirect, topology.WithMaxAge(time.Hour)),
		"single active on a binding": topology.New().Bind("e", "q", "k", topology.WithSingleActiveConsumer()),
	} {
		if err := topo.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		} else if !strings.Contains(err.Error(), "topology: ") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
