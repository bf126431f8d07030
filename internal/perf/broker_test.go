package perf

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/testenv"
	_ "github.com/acemq/acemq/rabbitmq"
	amqp "github.com/rabbitmq/amqp091-go"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The shape of the comparison, the same for raw and acemq.
const (
	window   = 1000 // publishes awaiting a confirm (SendAll batch size, raw window)
	senders  = 16   // goroutines calling Send
	prefetch = 200  // consumer prefetch
)

func unique(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "acemq-perf-" + prefix + "-" + hex.EncodeToString(b[:])
}

func ctxFor(tb testing.TB, d time.Duration) context.Context {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	tb.Cleanup(cancel)
	return ctx
}

// dialRaw opens a plain amqp091 connection, closed at cleanup.
func dialRaw(tb testing.TB, url string) *amqp.Connection {
	tb.Helper()
	ac, err := DialRaw(url, "acemq-perf raw "+tb.Name(), nil)
	if err != nil {
		tb.Fatalf("dialling RabbitMQ: %v", err)
	}
	tb.Cleanup(func() { _ = ac.Close() })
	return ac
}

// connect opens an acemq connection, closed at cleanup.
func connect(tb testing.TB, url string, opts ...acemq.ConnOption) *acemq.Conn {
	tb.Helper()
	opts = append([]acemq.ConnOption{acemq.WithName("acemq-perf " + tb.Name())}, opts...)
	c, err := acemq.Connect(ctxFor(tb, 30*time.Second), url, opts...)
	if err != nil {
		tb.Fatalf("acemq.Connect: %v", err)
	}
	tb.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// queueKind is a queue's x-queue-type.
type queueKind string

const (
	quorum  queueKind = "quorum"
	classic queueKind = "classic"
)

// declare declares a uniquely named queue on its own connection and
// deletes it at cleanup.
func declare(tb testing.TB, url string, kind queueKind) string {
	tb.Helper()
	name := unique(string(kind))
	ac, err := amqp.Dial(url)
	if err != nil {
		tb.Fatalf("dialling RabbitMQ: %v", err)
	}
	defer ac.Close()
	ch, err := ac.Channel()
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := ch.QueueDeclare(name, true, false, false, false, amqp.Table{"x-queue-type": string(kind)}); err != nil {
		tb.Fatalf("declaring %s: %v", name, err)
	}
	tb.Cleanup(func() {
		ac, err := amqp.Dial(url)
		if err != nil {
			return
		}
		defer ac.Close()
		if ch, err := ac.Channel(); err == nil {
			_, _ = ch.QueueDelete(name, false, false, false)
		}
	})
	return name
}

// fill puts n benchmark messages, with full envelopes, on queue through
// acemq, so that raw and acemq consumers read the same bytes.
//
// The work runs under the pprof label perf=setup, so that a CPU profile of
// a consume benchmark can leave it out: go tool pprof -tagignore perf=setup.
func fill(tb testing.TB, url, queue string, n int) {
	tb.Helper()
	pprof.Do(context.Background(), pprof.Labels("perf", "setup"), func(context.Context) { fillUnlabelled(tb, url, queue, n) })
}

func fillUnlabelled(tb testing.TB, url, queue string, n int) {
	c, err := acemq.Connect(ctxFor(tb, 30*time.Second), url)
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close(context.Background())
	p := acemq.NewPublisher[Order](c, "")
	batch := make([]acemq.Outgoing[Order], 0, window)
	order := NewOrder()
	ctx := ctxFor(tb, 10*time.Minute)
	for sent := 0; sent < n; {
		batch = batch[:0]
		for i := 0; i < window && sent+i < n; i++ {
			batch = append(batch, acemq.Outgoing[Order]{RoutingKey: queue, Payload: order, Envelope: newFullEnvelope()})
		}
		if _, err := p.SendAll(ctx, batch); err != nil {
			tb.Fatalf("filling %s: %v", queue, err)
		}
		sent += len(batch)
	}
}

// rawHeaders is what a careful application writes with plain amqp091 to
// carry the same information as a full envelope: the same header names and
// values acemq writes (FullEnvelope's table). Used only by the raw+headers
// variants.
func rawHeaders(id string) amqp.Table { return fullTable.For(id, "") }

// fullTable writes FullEnvelope's tables.
var fullTable = FullEnvelope.Prepare()

func brokerURL(tb testing.TB) string { return testenv.AMQPURL(tb) }

// cpuClock is the process's CPU time (user and system), for reporting what
// the client costs per message: on a shared machine it is steadier than
// throughput, which the broker and every other process also decide.
func cpuClock() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// brokerClock is the CPU time of the local RabbitMQ (the beam.smp process,
// found in /proc), or -1 when there is none on this machine. Other
// clients of the same broker count too: it is a rough guide to where the
// broker's time goes, not a benchmark result.
func brokerClock() time.Duration {
	brokerPIDOnce.Do(func() {
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			comm, err := os.ReadFile("/proc/" + e.Name() + "/comm")
			if err == nil && strings.TrimSpace(string(comm)) == "beam.smp" {
				brokerPID = e.Name()
				return
			}
		}
	})
	if brokerPID == "" {
		return -1
	}
	stat, err := os.ReadFile("/proc/" + brokerPID + "/stat")
	if err != nil {
		return -1
	}
	// Fields after the command (which is in parentheses): utime and stime
	// are the 12th and 13th, in clock ticks (100 a second on Linux).
	s := string(stat)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return -1
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

var (
	brokerPIDOnce sync.Once
	brokerPID     string
)

// meter measures one benchmark run: elapsed time, process CPU and the
// local broker's CPU.
type meter struct {
	start  time.Time
	cpu    time.Duration
	broker time.Duration
}

func startMeter() meter {
	return meter{start: time.Now(), cpu: cpuClock(), broker: brokerClock()}
}

// stop reports msgs/s and client CPU µs per message for n messages.
func (m meter) stop(b *testing.B, n int) {
	d := time.Since(m.start)
	cpu := cpuClock() - m.cpu
	b.StopTimer()
	b.ReportMetric(float64(n)/d.Seconds(), "msgs/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(n), "cpu-µs/msg")
	if m.broker >= 0 {
		if bc := brokerClock(); bc >= 0 {
			b.ReportMetric(float64((bc-m.broker).Microseconds())/float64(n), "broker-cpu-µs/msg")
		}
	}
}

// side is one side of a comparison: raw, rawhdr or acemq.
type side struct {
	name string
	run  func(b *testing.B)
}

// compare runs the sides one after the other, in the order given, or the
// reverse when ACEMQ_PERF_ORDER=reverse: scripts/perf-compare alternates,
// so that neither side always runs first on a broker still busy with the
// other's queue.
func compare(b *testing.B, sides ...side) {
	if os.Getenv("ACEMQ_PERF_ORDER") == "reverse" {
		slices.Reverse(sides)
	}
	for _, s := range sides {
		b.Run(s.name, s.run)
	}
}
