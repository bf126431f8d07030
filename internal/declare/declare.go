// Package declare holds what package topology's builder and package
// acemq's consumer declare with, so that both declare alike: the options
// an exchange, queue or binding collects (Spec, Option), a queue's retry
// policy as a declaration sees it (Retry), the dead-letter and retry halves
// of a queue (docs/wire.md §5.4), and the retry policies queues were
// declared with (Retries).
//
// Nothing is filled in from outside: a *topology.Topology embeds a Handle
// (an unexported field), and RetriesOf finds its policies through a method
// only this package can name; a connection's policies are its engine's
// (engine.Conn.Declared).
package declare

import (
	"sync"
	"time"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/wire"
)

// Spec collects the options of one exchange, queue or binding.
type Spec struct {
	Transient  bool
	AutoDelete bool
	Exclusive  bool
	Internal   bool
	Args       driver.Table
	ArgsErr    error
	QueueType  string
	// DeadLetterSet: WithDeadLettering was given (else quorum queues get it).
	DeadLetter, DeadLetterSet bool
	// Retry is the policy acemq.WithRetry gave, nil for none.
	Retry *Retry
	// Stream retention and single active consumer.
	MaxAge       time.Duration
	MaxBytes     int64
	SegmentBytes int64
	SingleActive bool
	MaxPriority  uint8
	MaxPrioSet   bool
	GroupSize    int
	GroupSizeSet bool
}

// Option is what every declaration option is: package topology's With…
// options and acemq.WithRetry. Its one method is unexported, so only Func
// and WithRetry make one.
type Option interface{ apply(*Spec) }

// Func is an option that sets fields of the Spec.
type Func func(*Spec)

func (f Func) apply(s *Spec) { f(s) }

// Collect applies opts, in order, to a new Spec; nil options are skipped.
func Collect[O Option](opts []O) Spec {
	var s Spec
	for _, o := range opts {
		if Option(o) != nil {
			o.apply(&s)
		}
	}
	return s
}

// Retry is a queue's retry policy as its declaration sees it.
type Retry struct {
	// Policy is the retry.Policy (the zero one is retry.None): a
	// comparable value that renders itself in the family's notation.
	Policy interface{ String() string }
	// Rungs are the waits the policy holds on broker rungs (each a rung
	// queue), ascending.
	Rungs []time.Duration
	// Err is the first nonsensical value the policy was built with.
	Err error
}

// WithRetry is the option acemq.WithRetry gives a queue.
func WithRetry(r Retry) Option { return Func(func(s *Spec) { s.Retry = &r }) }

// A Declarer takes declarations in the order a half makes them.
type Declarer interface {
	Exchange(driver.Exchange)
	Queue(driver.Queue)
	Bind(driver.Binding)
}

// Arguments the dead-letter half and the rungs use.
const (
	ArgDeadLetterExchange   = "x-dead-letter-exchange"
	ArgDeadLetterRoutingKey = "x-dead-letter-routing-key"
	argMessageTTL           = "x-message-ttl"
)

// DeadLetterHalf declares q's dead-letter half: acemq.dlx, {q}.dlq,
// {q}.parked and the two bindings between them.
func DeadLetterHalf(d Declarer, q string) {
	d.Exchange(driver.Exchange{Name: wire.DeadLetterExchange, Kind: driver.Direct, Durable: true})
	d.Queue(classicQueue(wire.DeadLetterQueue(q), nil))
	d.Queue(classicQueue(wire.ParkedQueue(q), nil))
	d.Bind(driver.Binding{Exchange: wire.DeadLetterExchange, Queue: wire.DeadLetterQueue(q), RoutingKey: wire.DeadLetterQueue(q)})
	d.Bind(driver.Binding{Exchange: wire.DeadLetterExchange, Queue: wire.ParkedQueue(q), RoutingKey: wire.ParkedQueue(q)})
}

// RetryHalf declares q's retry half for rungs: acemq.retry, a rung queue
// per wait and the return binding acemq.retry → q on q; nothing when there
// are no rungs.
func RetryHalf(d Declarer, q string, rungs []time.Duration) {
	if len(rungs) == 0 {
		return
	}
	d.Exchange(driver.Exchange{Name: wire.RetryExchange, Kind: driver.Direct, Durable: true})
	for _, w := range rungs {
		d.Queue(classicQueue(wire.RungQueue(q, w), driver.Table{
			argMessageTTL:           w.Milliseconds(),
			ArgDeadLetterExchange:   wire.RetryExchange,
			ArgDeadLetterRoutingKey: q,
		}))
	}
	d.Bind(driver.Binding{Exchange: wire.RetryExchange, Queue: q, RoutingKey: q})
}

func classicQueue(name string, args driver.Table) driver.Queue {
	if args == nil {
		args = driver.Table{}
	}
	return driver.Queue{Name: name, Durable: true, Args: args}
}

// Retries maps queues to the retry policies they were declared with. It is
// safe for concurrent use.
type Retries struct {
	mu sync.Mutex
	m  map[string]Retry
}

// Lookup returns the policy q was declared with.
func (r *Retries) Lookup(q string) (Retry, bool) {
	if r == nil {
		return Retry{}, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.m[q]
	return p, ok
}

// Set records that q is declared with p.
func (r *Retries) Set(q string, p Retry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = make(map[string]Retry)
	}
	r.m[q] = p
}

// all is a copy of the policies.
func (r *Retries) all() map[string]Retry {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]Retry, len(r.m))
	for q, p := range r.m {
		out[q] = p
	}
	return out
}

// Remember records the policies of from (a topology just applied); a
// later topology's policy for a queue replaces an earlier one.
func (r *Retries) Remember(from *Retries) {
	for q, p := range from.all() {
		r.Set(q, p)
	}
}

// Forget drops the policies of the queues of from (a topology deleted).
func (r *Retries) Forget(from *Retries) {
	ps := from.all()
	r.mu.Lock()
	defer r.mu.Unlock()
	for q := range ps {
		delete(r.m, q)
	}
}

// Handle lets a type that embeds it (a *topology.Topology) be found by
// RetriesOf. Its one method is unexported, so embedding it adds nothing to
// the embedding type's API.
type Handle struct{ r *Retries }

// NewHandle returns the Handle of r.
func NewHandle(r *Retries) Handle { return Handle{r} }

func (h Handle) retries() *Retries { return h.r }

// RetriesOf returns the policies of t, a *topology.Topology (nil for
// anything else).
func RetriesOf(t any) *Retries {
	h, ok := t.(interface{ retries() *Retries })
	if !ok {
		return nil
	}
	return h.retries()
}
