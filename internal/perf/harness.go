package perf

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
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
	amqp "github.com/rabbitmq/amqp091-go"
)

// The benchmark harness: what the benchmarks of this package and of the
// peer suite (bench/peers, a module of its own so that the peers stay out
// of the library's dependencies) share to measure every side the same way.

// The shape of the comparison, the same for every side.
const (
	Window   = 1000 // publishes awaiting a confirm (SendAll batch size, raw window)
	Senders  = 16   // goroutines calling Send
	Prefetch = 200  // consumer prefetch
)

// Unique is a fresh queue name beginning acemq-perf-prefix-.
func Unique(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "acemq-perf-" + prefix + "-" + hex.EncodeToString(b[:])
}

// CtxFor is a context ended after d or at tb's cleanup.
func CtxFor(tb testing.TB, d time.Duration) context.Context {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	tb.Cleanup(cancel)
	return ctx
}

// OpenRaw opens a plain amqp091 connection, closed at cleanup.
func OpenRaw(tb testing.TB, url string) *amqp.Connection {
	tb.Helper()
	ac, err := DialRaw(url, "acemq-perf raw "+tb.Name(), nil)
	if err != nil {
		tb.Fatalf("dialling RabbitMQ: %v", err)
	}
	tb.Cleanup(func() { _ = ac.Close() })
	return ac
}

// Connect opens an acemq connection, closed at cleanup.
func Connect(tb testing.TB, url string, opts ...acemq.ConnOption) *acemq.Conn {
	tb.Helper()
	opts = append([]acemq.ConnOption{acemq.WithName("acemq-perf " + tb.Name())}, opts...)
	c, err := acemq.Connect(CtxFor(tb, 30*time.Second), url, opts...)
	if err != nil {
		tb.Fatalf("acemq.Connect: %v", err)
	}
	tb.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// QueueKind is a queue's x-queue-type.
type QueueKind string

// The queue types the benchmarks use.
const (
	Quorum  QueueKind = "quorum"
	Classic QueueKind = "classic"
)

// Declare declares a uniquely named durable queue of kind on its own
// connection and deletes it at cleanup.
func Declare(tb testing.TB, url string, kind QueueKind) string {
	tb.Helper()
	name := Unique(string(kind))
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

// Fill puts n benchmark messages, with full envelopes, on queue through
// acemq, so that every consuming side reads the same bytes.
//
// The work runs under the pprof label perf=setup, so that a CPU profile of
// a consume benchmark can leave it out: go tool pprof -tagignore perf=setup.
//
// When the environment names a filler (FillerEnv), the filling is done
// there, by another process (ServeFiller, which `perfcompare count` runs),
// so that a consuming side run under callgrind counts only its own work.
func Fill(tb testing.TB, url, queue string, n int) {
	tb.Helper()
	if addr := os.Getenv(FillerEnv); addr != "" {
		if err := fillRemote(addr, url, queue, n); err != nil {
			tb.Fatal(err)
		}
		return
	}
	pprof.Do(context.Background(), pprof.Labels("perf", "setup"), func(context.Context) {
		if err := fillQueue(url, queue, n); err != nil {
			tb.Fatal(err)
		}
	})
}

// fillQueue is Fill's work, in this process.
func fillQueue(url, queue string, n int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c, err := acemq.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	p := acemq.NewPublisher[Order](c, "")
	batch := make([]acemq.Outgoing[Order], 0, Window)
	order := NewOrder()
	for sent := 0; sent < n; {
		batch = batch[:0]
		for i := 0; i < Window && sent+i < n; i++ {
			batch = append(batch, acemq.Outgoing[Order]{RoutingKey: queue, Payload: order, Envelope: NewFullEnvelope()})
		}
		if _, err := p.SendAll(ctx, batch); err != nil {
			return fmt.Errorf("filling %s: %w", queue, err)
		}
		sent += len(batch)
	}
	return nil
}

// CountEnv is the environment variable that puts the benchmarks in
// counting mode (ACEMQ_PERF_COUNT=1), the mode `perfcompare count` runs
// them in under callgrind: StartMeter does not wait for the broker to go
// quiet (the wait's polling would be counted, and the broker's pace does
// not change a count).
const CountEnv = "ACEMQ_PERF_COUNT"

// Counting reports whether the benchmarks run in counting mode (CountEnv).
func Counting() bool { return os.Getenv(CountEnv) == "1" }

// FillerEnv is the environment variable naming the Unix socket of a filler
// (ServeFiller) that Fill asks to fill its queues. A benchmark run under
// callgrind cannot fill in a child process of its own: the child's exit
// signal (SIGCHLD) stops callgrind 3.19.
const FillerEnv = "ACEMQ_PERF_FILLER"

// fillRemote asks the filler at addr to fill queue with n messages and
// waits for it to finish.
func fillRemote(addr, url, queue string, n int) error {
	conn, err := net.Dial("unix", addr)
	if err != nil {
		return fmt.Errorf("asking the filler to fill %s: %w", queue, err)
	}
	defer conn.Close()
	if _, err := fmt.Fprintf(conn, "%s\t%s\t%d\n", url, queue, n); err != nil {
		return fmt.Errorf("asking the filler to fill %s: %w", queue, err)
	}
	reply, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return fmt.Errorf("asking the filler to fill %s: %w", queue, err)
	}
	if reply = strings.TrimSpace(reply); reply != "ok" {
		return fmt.Errorf("the filler could not fill %s: %s", queue, reply)
	}
	return nil
}

// ServeFiller fills queues for the benchmarks of other processes (Fill,
// with FillerEnv naming ln's address), one request per connection: a line
// of the broker's URL, the queue and the message count, separated by tabs,
// answered with "ok" or the error once the queue is filled. It returns
// when ln is closed.
func ServeFiller(ln net.Listener) error {
	for {
		conn, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		go func() {
			defer conn.Close()
			line, err := bufio.NewReader(conn).ReadString('\n')
			if err != nil {
				return
			}
			f := strings.Split(strings.TrimSpace(line), "\t")
			if len(f) != 3 {
				fmt.Fprintln(conn, "error: a fill request is url, queue and count, separated by tabs")
				return
			}
			n, err := strconv.Atoi(f[2])
			if err == nil {
				err = fillQueue(f[0], f[1], n)
			}
			if err != nil {
				fmt.Fprintln(conn, "error:", err)
				return
			}
			fmt.Fprintln(conn, "ok")
		}()
	}
}

// NewFullEnvelope builds the envelope an application sends with each
// message: a fresh id and first-seen, and every other field set, those of
// FullEnvelope (which the rawhdr sides write by hand with FullTable).
func NewFullEnvelope() acemq.Envelope {
	return acemq.MustEnvelope(acemq.Fields{
		Type:          FullEnvelope.Type,
		Version:       int(FullEnvelope.Version),
		CorrelationID: FullEnvelope.Correlation,
		CausationID:   FullEnvelope.Causation,
		Origin:        FullEnvelope.Origin,
		Headers:       appHeaders,
	})
}

var appHeaders = map[string]any(FullEnvelope.Headers)

// FullTable writes FullEnvelope's tables.
var FullTable = FullEnvelope.Prepare()

// CPUClock is the process's CPU time (user and system), for reporting what
// the client costs per message: on a shared machine it is steadier than
// throughput, which the broker and every other process also decide.
func CPUClock() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BrokerClock is the CPU time of the local RabbitMQ (the beam.smp process,
// found in /proc), or -1 when there is none on this machine. Other
// clients of the same broker count too: it is a rough guide to where the
// broker's time goes, not a benchmark result.
func BrokerClock() time.Duration {
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

// Meter measures one benchmark run: elapsed time, process CPU and the
// local broker's CPU.
type Meter struct {
	start  time.Time
	cpu    time.Duration
	broker time.Duration
}

// StartMeter waits for the local broker to go quiet (quiesce), then starts
// measuring. The wait falls inside the benchmark's own timer (ns/op), not
// in what the Meter reports. In counting mode (Counting) it does not wait.
func StartMeter() Meter {
	if !Counting() {
		quiesce()
	}
	return Meter{start: time.Now(), cpu: CPUClock(), broker: BrokerClock()}
}

// The broker is quiet when it spends less than quietShare of a core over
// quietWindow; quiesce waits at most quietWait for that.
const (
	quietWindow = 250 * time.Millisecond
	quietShare  = 0.10
	quietWait   = 15 * time.Second
)

// quiesce waits until the local broker is quiet: after a run's set-up
// (a queue filled, the previous side's queue deleted) a quorum queue
// keeps the broker busy for a while writing and compacting its log, and
// a side measured in that time shares the cores with it. It returns at
// once without a local broker, and after quietWait whatever the broker is
// doing (another client of the same broker may never let it rest).
func quiesce() {
	if BrokerClock() < 0 {
		return
	}
	deadline := time.Now().Add(quietWait)
	for time.Now().Before(deadline) {
		before := BrokerClock()
		time.Sleep(quietWindow)
		if float64(BrokerClock()-before) < quietShare*float64(quietWindow) {
			return
		}
	}
}

// Stop stops b's timer and reports msgs/s, client CPU µs per message and
// (with a local broker) the broker's CPU µs per message for n messages.
func (m Meter) Stop(b *testing.B, n int) {
	d := time.Since(m.start)
	cpu := CPUClock() - m.cpu
	b.StopTimer()
	b.ReportMetric(float64(n)/d.Seconds(), "msgs/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(n), "cpu-µs/msg")
	if m.broker >= 0 {
		if bc := BrokerClock(); bc >= 0 {
			b.ReportMetric(float64((bc-m.broker).Microseconds())/float64(n), "broker-cpu-µs/msg")
		}
	}
}

// Side is one side of a comparison: raw, rawhdr, acemq, a peer.
type Side struct {
	Name string
	Run  func(b *testing.B)
}

// Compare runs the sides one after the other, in the order given, or the
// reverse when ACEMQ_PERF_ORDER=reverse: scripts/perf-compare alternates,
// so that no side always runs first on a broker still busy with another's
// queue.
func Compare(b *testing.B, sides ...Side) {
	if os.Getenv("ACEMQ_PERF_ORDER") == "reverse" {
		sides = slices.Clone(sides)
		slices.Reverse(sides)
	}
	for _, s := range sides {
		b.Run(s.Name, s.Run)
	}
}
