package partition

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/topology"
)

// Of is the partition of key among n partitions: FNV-1a 32-bit over the
// key's UTF-8 bytes (offset basis 2166136261, prime 16777619), the
// unsigned value modulo n (docs/wire.md §5.10). A count of 1 or less gives
// 0.
//
// This is the family's interop rule (Python's). .NET masks the hash to 31
// bits first and Java takes floorMod of the signed value: both put a key
// in another partition whenever the hash's top bit is set, so feed one key
// space from producers written in one language.
func Of(key string, n int) int {
	if n <= 1 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return int(h.Sum32() % uint32(n))
}

// RoutingKey is the routing key of partition p of base: "{base}.{p}", for
// example orders.3.
func RoutingKey(base string, p int) string { return base + "." + strconv.Itoa(p) }

// Route is the routing key of key among n partitions of base.
func Route(base, key string, n int) string { return RoutingKey(base, Of(key, n)) }

// MemberTag is the consumer tag of member n (from 1) of a consumer group
// on queue: acemq-{queue}-{n}.
func MemberTag(queue string, n int) string { return "acemq-" + queue + "-" + strconv.Itoa(n) }

// Topology is the topology of n partitions of base behind a direct
// exchange: the exchange, and queues {base}.0 … {base}.{n-1}, each bound
// with its own name as routing key and declared with a single active
// consumer (topology.WithSingleActiveConsumer) and opts (a queue type,
// topology.WithDeadLettering, …). n must be at least 1. Streams cannot have a
// single active consumer over AMQP 0-9-1: build a topology of stream
// partitions with topology.New and RoutingKey instead. Mistakes in
// opts are reported by the topology's Validate, as ever.
func Topology(exchange, base string, n int, opts ...topology.Option) (*topology.Topology, error) {
	if n < 1 {
		return nil, fmt.Errorf("partition: Topology(%d partitions): at least 1 is needed", n)
	}
	t := topology.New()
	t.Exchange(exchange, topology.ExchangeDirect)
	qopts := append([]topology.Option{topology.WithSingleActiveConsumer()}, opts...)
	for p := range n {
		q := RoutingKey(base, p)
		t.Queue(q, qopts...)
		t.Bind(exchange, q, q)
	}
	return t, nil
}

// Publisher sends values to the partition their key names.
type Publisher[T any] struct {
	p    *acemq.Publisher[T]
	base string
	n    int
	key  func(T) string
}

// NewPublisher returns a publisher that sends each value to exchange with
// the routing key of key(v) among n partitions of base. opts configure the
// underlying acemq.Publisher.
func NewPublisher[T any](conn *acemq.Conn, exchange, base string, n int, key func(T) string, opts ...acemq.PublisherOption) (*Publisher[T], error) {
	switch {
	case conn == nil:
		return nil, errors.New("partition: NewPublisher needs a connection")
	case key == nil:
		return nil, errors.New("partition: NewPublisher needs a key function")
	case n < 1:
		return nil, fmt.Errorf("partition: NewPublisher(%d partitions): at least 1 is needed", n)
	case base == "":
		return nil, errors.New("partition: NewPublisher needs the partitions' base name, for example orders for orders.0, orders.1, …")
	}
	return &Publisher[T]{p: acemq.NewPublisher[T](conn, exchange, opts...), base: base, n: n, key: key}, nil
}

// Partition is the partition v goes to.
func (p *Publisher[T]) Partition(v T) int { return Of(p.key(v), p.n) }

// Send publishes v to its partition, as acemq.Publisher.Send does.
func (p *Publisher[T]) Send(ctx context.Context, v T, opts ...acemq.SendOption) (acemq.Envelope, error) {
	return p.p.Send(ctx, RoutingKey(p.base, p.Partition(v)), v, opts...)
}

// Join starts member n (from 1) of the consumer group on queue: an
// acemq.Consume with the member's tag, acemq-{queue}-{n}. On a queue with a
// single active consumer (Topology declares its partitions so) one member
// receives at a time, in queue order; when it goes, the next member to
// have joined takes over with what it left unsettled. Keep the default
// concurrency of 1, or use acemq.WithOrderKey, for the order to hold in the
// handler too.
func Join[T any](ctx context.Context, conn *acemq.Conn, queue string, member int, h acemq.Handler[T], opts ...acemq.ConsumeOption) (*acemq.Consumer, error) {
	if member < 1 {
		return nil, fmt.Errorf("partition: Join(member %d): members are numbered from 1", member)
	}
	return acemq.Consume(ctx, conn, queue, h, append(opts, acemq.WithConsumerTag(MemberTag(queue, member)))...)
}
