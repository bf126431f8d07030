package acemq

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// attrKey identifies a cached attribute set: kind selects the tag names.
type attrKey struct {
	kind    byte
	a, b, c string
}

// attrCacheMax bounds the cached attribute sets; past it, sets are built
// per measurement (high-cardinality routing keys).
const attrCacheMax = 4096

// metricQueueName is the name a queue goes by in metric tags. A queue named
// for one process's lifetime — a generated reply queue (acemq-reply-<uuid>,
// and the Java and .NET siblings' acemq.reply.<uuid>), a server-named queue
// (amq.gen-…), or RabbitMQ's direct reply-to address — is tagged with its
// pattern instead, so that requesters and subscribers that come and go do
// not each add series for good to every responder's and their own metrics.
// Spans keep the real name.
func metricQueueName(q string) string {
	switch {
	case generatedName(q, "acemq-reply-"):
		return "acemq-reply-*"
	case generatedName(q, "acemq.reply."):
		return "acemq.reply.*"
	case strings.HasPrefix(q, "amq.gen-"):
		return "amq.gen-*"
	case strings.HasPrefix(q, "amq.rabbitmq.reply-to."):
		return "amq.rabbitmq.reply-to.*"
	}
	return q
}

// generatedName reports whether name is prefix followed by a UUID, with or
// without hyphens: a name a library generated, not one an application chose.
func generatedName(name, prefix string) bool {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok || (len(rest) != 32 && len(rest) != 36) {
		return false
	}
	for i := 0; i < len(rest); i++ {
		switch c := rest[i]; {
		case c >= '0' && c <= '9', c >= 'a' && c <= 'f', c >= 'A' && c <= 'F', c == '-':
		default:
			return false
		}
	}
	return true
}

// attrCache keeps the measurement option of each tag combination, so a
// measurement builds no attribute set after the first of its kind.
type attrCache struct {
	m sync.Map // attrKey → metric.MeasurementOption
	n atomic.Int64
}

func (c *attrCache) get(k attrKey) metric.MeasurementOption {
	switch k.kind {
	case 'e':
	case 'p':
		if k.a == "" { // the default exchange routes by queue name
			k.b = metricQueueName(k.b)
		}
	default:
		k.a = metricQueueName(k.a)
	}
	if v, ok := c.m.Load(k); ok {
		return v.(metric.MeasurementOption)
	}
	opt := metric.WithAttributeSet(k.set())
	if c.n.Load() < attrCacheMax {
		if _, loaded := c.m.LoadOrStore(k, opt); !loaded {
			c.n.Add(1)
		}
	}
	return opt
}

func (k attrKey) set() attribute.Set {
	switch k.kind {
	case 'p':
		return attribute.NewSet(attribute.String("exchange", k.a), attribute.String("routing.key", k.b), attribute.String("outcome", k.c))
	case 'c':
		return attribute.NewSet(attribute.String("queue", k.a), attribute.String("outcome", k.b))
	case 'q':
		return attribute.NewSet(attribute.String("queue", k.a))
	case 'w':
		return attribute.NewSet(attribute.String("queue", k.a), attribute.String("where", k.b))
	case 'd':
		return attribute.NewSet(attribute.String("queue", k.a), attribute.String("outcome", k.b))
	case 't':
		return attribute.NewSet(attribute.String("queue", k.a), attribute.String("target", k.b))
	case 'r':
		return attribute.NewSet(attribute.String("queue", k.a), attribute.String("rung", k.b))
	case 'e':
		return attribute.NewSet(attribute.String("event", k.a))
	}
	panic("acemq: unknown attribute kind " + strconv.Itoa(int(k.kind)))
}
