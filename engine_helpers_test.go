package acemq_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/memory"
	_ "github.com/acemq/acemq/rabbitmq"
	"github.com/acemq/acemq/topology"
)

// recordingScheme is a test transport: recording://NAME is the memory
// broker memory://NAME behind a driver.Conn that records every declaration
// made through it.
const recordingScheme = "acemq-recording"

func init() {
	driver.Register(recordingScheme, brokertest.MemoryDriver{Wrap: func(c brokertest.FullConn) driver.Conn { return &recordingConn{FullConn: c} }})
}

type recordingConn struct {
	brokertest.FullConn
	mu    sync.Mutex
	decls []topology.Declaration
}

func (c *recordingConn) record(d topology.Declaration) {
	c.mu.Lock()
	c.decls = append(c.decls, d)
	c.mu.Unlock()
}

// take returns what was declared since the last take.
func (c *recordingConn) take() []topology.Declaration {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.decls
	c.decls = nil
	return out
}

func (c *recordingConn) DeclareExchange(ctx context.Context, e driver.Exchange) error {
	c.record(topology.Declaration{Kind: topology.ExchangeDeclaration, Exchange: e})
	return c.FullConn.DeclareExchange(ctx, e)
}

func (c *recordingConn) DeclareQueue(ctx context.Context, q driver.Queue) (driver.QueueInfo, error) {
	c.record(topology.Declaration{Kind: topology.QueueDeclaration, Queue: q})
	return c.FullConn.DeclareQueue(ctx, q)
}

func (c *recordingConn) Bind(ctx context.Context, b driver.Binding) error {
	c.record(topology.Declaration{Kind: topology.BindingDeclaration, Binding: b})
	return c.FullConn.Bind(ctx, b)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// connectRecording opens a connection on a fresh memory broker whose
// transport records declarations.
func connectRecording(t *testing.T) (*acemq.Conn, *recordingConn) {
	t.Helper()
	name := testenv.Name(t) + "-" + randomHex(3)
	c, err := acemq.Connect(context.Background(), recordingScheme+"://"+name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Close(context.Background())
		memory.Reset(name)
	})
	return c, brokertest.Driver(c).(*recordingConn)
}

// backend is a broker the engine tests run against.
type backend struct {
	name string
	// open connects, registering cleanups; it skips when the broker is not
	// available.
	open func(t *testing.T) *acemq.Conn
}

var memoryBackend = backend{
	name: "memory",
	open: func(t *testing.T) *acemq.Conn {
		c, err := acemq.Connect(context.Background(), brokertest.MemoryURL(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close(context.Background()) })
		return c
	},
}

var rabbitBackend = backend{
	name: "rabbitmq",
	open: func(t *testing.T) *acemq.Conn {
		u := testenv.AMQPURL(t)
		c, err := acemq.Connect(context.Background(), u, acemq.WithName("acemq-engine-test "+t.Name()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close(context.Background()) })
		return c
	},
}

// rig is one engine test: a connection, a uniquely named source queue
// (quorum, dead-lettering) and the settlements recorded on it.
type rig struct {
	t       *testing.T
	conn    *acemq.Conn
	q       string
	settled chan acemq.Settlement
	mu      sync.Mutex
	cleanup []string // queues to delete
}

const waitFor = 15 * time.Second

func newRig(t *testing.T, b backend) *rig {
	t.Helper()
	conn := b.open(t)
	r := &rig{
		t:       t,
		conn:    conn,
		q:       testenv.Unique(t, "acemq-test"),
		settled: make(chan acemq.Settlement, 1000),
	}
	r.cleanup = []string{r.q, r.q + ".dlq", r.q + ".parked"}
	// Registered after the connection's cleanup, so it runs before it.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r.mu.Lock()
		names := slices.Clone(r.cleanup)
		r.mu.Unlock()
		for _, n := range names {
			_, _ = brokertest.Driver(conn).DeleteQueue(ctx, n)
		}
	})
	remove := conn.OnSettle(func(s acemq.Settlement) {
		select {
		case r.settled <- s:
		default:
			t.Errorf("settlement channel full; dropped %+v", s)
		}
	})
	t.Cleanup(remove)
	if err := topology.New().Queue(r.q, topology.WithDeadLettering(true)).Apply(context.Background(), conn); err != nil {
		t.Fatal(err)
	}
	return r
}

// consume starts a consumer of the rig's queue, closed when the test ends.
func consume[T any](r *rig, h acemq.Handler[T], opts ...acemq.ConsumeOption) *acemq.Consumer {
	r.t.Helper()
	return r.track(acemq.Consume(context.Background(), r.conn, r.q, h, opts...))
}

// track fails the test on err, and registers c's queues (its rungs
// included) for deletion and c for closing when the test ends.
func (r *rig) track(c *acemq.Consumer, err error) *acemq.Consumer {
	r.t.Helper()
	if err != nil {
		r.t.Fatal(err)
	}
	r.mu.Lock()
	for _, d := range acemq.ConsumerDeclarations(r.q, c.Policy()) {
		if d.Kind == topology.QueueDeclaration && !slices.Contains(r.cleanup, d.Queue.Name) {
			r.cleanup = append(r.cleanup, d.Queue.Name)
		}
	}
	r.mu.Unlock()
	r.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Close(ctx)
	})
	return c
}

// enginePath is one promise of a consumer, run on each backend.
type enginePath struct {
	name string
	run  func(t *testing.T, b backend)
}

// runPaths runs each path on b, in parallel.
func runPaths(t *testing.T, paths []enginePath, b backend) {
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			p.run(t, b)
		})
	}
}

type order struct {
	ID string `json:"id"`
}

// publish sends an order to the rig's queue through the default exchange.
func (r *rig) publish(id string, env acemq.Envelope) acemq.Envelope {
	r.t.Helper()
	if env.ID() == "" {
		env = acemq.MustEnvelope(acemq.Fields{})
	}
	body := fmt.Sprintf(`{"id":%q}`, id)
	err := brokertest.Publish(context.Background(), r.conn, brokertest.Outbound{RoutingKey: r.q, Envelope: env, ContentType: "application/json", Body: []byte(body)})
	if err != nil {
		r.t.Fatal(err)
	}
	return env
}

// publishRaw sends a message straight through the transport, headers as
// given.
func (r *rig) publishRaw(m driver.Message) {
	r.t.Helper()
	if m.RoutingKey == "" {
		m.RoutingKey = r.q
	}
	m.Mandatory = true
	if err := brokertest.Driver(r.conn).Publish(context.Background(), m); err != nil {
		r.t.Fatal(err)
	}
}

// next waits for the next settlement.
func (r *rig) next() acemq.Settlement {
	r.t.Helper()
	select {
	case s := <-r.settled:
		return s
	case <-time.After(waitFor):
		r.t.Fatalf("no settlement within %v", waitFor)
	}
	return acemq.Settlement{}
}

// byAttempt waits for n settlements and returns them ordered by attempt.
// A wait in the consumer records its settlement once the copy is confirmed
// and the original acked, by which time the copy may already have been
// handled and settled: settlements of one message can arrive out of order.
func (r *rig) byAttempt(n int) []acemq.Settlement {
	r.t.Helper()
	out := make([]acemq.Settlement, 0, n)
	for range n {
		out = append(out, r.next())
	}
	slices.SortStableFunc(out, func(a, b acemq.Settlement) int { return a.Envelope.Attempt() - b.Envelope.Attempt() })
	return out
}

// get fetches and acks one message from queue, waiting for it.
func (r *rig) get(queue string) driver.Delivery {
	r.t.Helper()
	return brokertest.Get(r.t, r.conn, queue)
}

// messages waits until queue holds n ready messages.
func (r *rig) messages(queue string, n int) {
	r.t.Helper()
	testenv.Eventually(r.t, fmt.Sprintf("%s to hold %d messages", queue, n), func() bool {
		return brokertest.Depth(r.t, r.conn, queue) == n
	})
}
