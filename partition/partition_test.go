package partition_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/partition"
	"github.com/acemq/acemq/topology"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Fixed vectors (docs/wire.md §5.10). "", "a" and "foobar" are FNV-1a's
// published test strings (0x811c9dc5, 0xe40c292c, 0xbf9cf968): all three
// hashes have the top bit set, where Java's floorMod of the signed value
// and .NET's 31-bit mask give other partitions (shown for n = 7).
func TestOfVectors(t *testing.T) {
	cases := []struct {
		key  string
		want map[int]int // partition count → partition
	}{
		{"", map[int]int{2: 1, 3: 1, 4: 1, 7: 2, 8: 5, 10: 1, 12: 1}},         // 0x811c9dc5; Java 5, .NET 0 for n=7
		{"a", map[int]int{2: 0, 3: 1, 4: 0, 7: 5, 8: 4, 10: 0, 12: 4}},        // 0xe40c292c; Java 1, .NET 3
		{"foobar", map[int]int{2: 0, 3: 1, 4: 0, 7: 0, 8: 0, 10: 0, 12: 4}},   // 0xbf9cf968; Java 3, .NET 5
		{"order-1", map[int]int{2: 1, 3: 1, 4: 1, 7: 1, 8: 5, 10: 9, 12: 1}},  // 0x2b7fcd6d
		{"order-42", map[int]int{2: 0, 3: 2, 4: 0, 7: 4, 8: 4, 10: 2, 12: 8}}, // 0x572446f4
		{"ünïcödé", map[int]int{2: 0, 3: 1, 4: 2, 7: 6, 8: 2, 10: 4, 12: 10}}, // UTF-8 bytes, 0x30eaf7d2
		{"🙂", map[int]int{2: 1, 3: 0, 4: 3, 7: 3, 8: 3, 10: 7, 12: 3}},        // 0x57a37a4b
	}
	for _, c := range cases {
		for n, want := range c.want {
			if got := partition.Of(c.key, n); got != want {
				t.Errorf("Of(%q, %d) = %d, want %d", c.key, n, got, want)
			}
		}
		for _, n := range []int{1, 0, -3} {
			if got := partition.Of(c.key, n); got != 0 {
				t.Errorf("Of(%q, %d) = %d; a count of 1 or less gives 0", c.key, n, got)
			}
		}
	}
	if got := partition.Route("orders", "foobar", 7); got != "orders.0" {
		t.Errorf("Route = %q, want orders.0", got)
	}
	if got := partition.MemberTag("orders.3", 2); got != "acemq-orders.3-2" {
		t.Errorf("MemberTag = %q", got)
	}
}

func FuzzOf(f *testing.F) {
	f.Add("order-1", 8)
	f.Add("", 1)
	f.Fuzz(func(t *testing.T, key string, n int) {
		p := partition.Of(key, n)
		if p < 0 || (n > 1 && p >= n) || (n <= 1 && p != 0) {
			t.Fatalf("Of(%q, %d) = %d", key, n, p)
		}
	})
}

type order struct {
	Customer string `json:"customer"`
	N        int    `json:"n"`
}

func TestPublisherRoutesByKey(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		ex := testenv.Unique(t, "orders")
		const n = 4
		topo, err := partition.Topology(ex, ex, n, topology.WithQueueType(topology.QueueClassic))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = topo.Delete(context.Background(), c) })
		if err := topo.Apply(context.Background(), c); err != nil {
			t.Fatal(err)
		}
		pub, err := partition.NewPublisher(c, ex, ex, n, func(o order) string { return o.Customer })
		if err != nil {
			t.Fatal(err)
		}
		want := map[int][]int{}
		for i := range 20 {
			o := order{Customer: fmt.Sprintf("customer-%d", i%5), N: i}
			if _, err := pub.Send(context.Background(), o); err != nil {
				t.Fatal(err)
			}
			p := partition.Of(o.Customer, n)
			if pub.Partition(o) != p {
				t.Fatalf("Partition(%v) = %d, Of = %d", o, pub.Partition(o), p)
			}
			want[p] = append(want[p], i)
		}
		for p := range n {
			q := partition.RoutingKey(ex, p)
			var got []int
			for range want[p] {
				d := brokertest.Get(t, c, q)
				var o order
				if err := acemq.JSON.Decode(d.Body, d.ContentType, &o); err != nil {
					t.Fatal(err)
				}
				if partition.Of(o.Customer, n) != p {
					t.Errorf("%v arrived on partition %d", o, p)
				}
				got = append(got, o.N)
			}
			if !slices.Equal(got, want[p]) {
				t.Errorf("partition %d holds %v, want %v in publish order", p, got, want[p])
			}
		}
	})
}

func TestTopologyRefusesNoPartitions(t *testing.T) {
	if _, err := partition.Topology("x", "x", 0); err == nil {
		t.Error("a topology of 0 partitions was accepted")
	}
	if _, err := partition.NewPublisher(nil, "x", "x", 2, func(string) string { return "" }); err == nil {
		t.Error("a publisher without a connection was accepted")
	}
}

// group starts members 1 and 2 of a group on one partition queue, each on
// its own connection, and returns what each handled, in order. The first
// member's handler blocks on message stall until release is closed.
type member struct {
	conn *acemq.Conn
	mu   sync.Mutex
	got  []int
	redo []bool
}

func (m *member) seen() ([]int, []bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.got), slices.Clone(m.redo)
}

func join(t *testing.T, conn *acemq.Conn, q string, n int, m *member, stall int, reached, release chan struct{}) *acemq.Consumer {
	t.Helper()
	m.conn = conn
	cons, err := partition.Join(context.Background(), conn, q, n, func(_ context.Context, msg acemq.Message[order]) acemq.Ack {
		m.mu.Lock()
		m.got = append(m.got, msg.Payload.N)
		m.redo = append(m.redo, msg.Redelivered)
		m.mu.Unlock()
		if msg.Payload.N == stall && release != nil {
			close(reached)
			<-release
		}
		return acemq.Accept()
	})
	if err != nil {
		t.Fatal(err)
	}
	if cons.Tag() != partition.MemberTag(q, n) {
		t.Errorf("member %d has tag %q", n, cons.Tag())
	}
	return cons
}

// runGroup checks the standby taking over, in order, when the active
// member's connection dies while it handles message 4: kill does the
// killing.
func runGroup(t *testing.T, url string, kill func(t *testing.T, active *acemq.Conn, name string)) {
	admin := brokertest.Connect(t, url)
	ex := testenv.Unique(t, "group")
	topo, err := partition.Topology(ex, ex, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = topo.Delete(context.Background(), admin) })
	if err := topo.Apply(context.Background(), admin); err != nil {
		t.Fatal(err)
	}
	q := partition.RoutingKey(ex, 0)
	// The members' consumers declare the queue's parked and dead-letter
	// queues, which the partition topology does not hold.
	t.Cleanup(func() {
		for _, name := range []string{contract.ParkedQueue(q), contract.DeadLetterQueue(q)} {
			if _, err := brokertest.Driver(admin).DeleteQueue(context.Background(), name); err != nil && !errors.Is(err, driver.ErrNotFound) {
				t.Errorf("deleting %s: %v", name, err)
			}
		}
	})
	name1 := testenv.Unique(t, "member-1")
	var m1, m2 member
	reached, release := make(chan struct{}), make(chan struct{})
	c1 := join(t, brokertest.Connect(t, url, acemq.WithName(name1)), q, 1, &m1, 4, reached, release)
	c2 := join(t, brokertest.Connect(t, url), q, 2, &m2, -1, nil, nil)
	t.Cleanup(func() { brokertest.Stop(t, c2) })
	pub, err := partition.NewPublisher(admin, ex, ex, 1, func(o order) string { return o.Customer })
	if err != nil {
		t.Fatal(err)
	}
	const total = 10
	for i := range total {
		if _, err := pub.Send(context.Background(), order{Customer: "c", N: i}); err != nil {
			t.Fatal(err)
		}
	}
	<-reached
	if got, _ := m2.seen(); len(got) != 0 {
		t.Fatalf("the standby handled %v while the active member lived", got)
	}
	kill(t, m1.conn, name1)
	testenv.Eventually(t, "the standby to handle the rest", func() bool {
		got, _ := m2.seen()
		return len(got) > 0 && got[len(got)-1] == total-1
	})
	close(release)
	t.Cleanup(func() { _ = c1.Close(context.Background()) })
	got1, _ := m1.seen()
	got2, redo := m2.seen()
	if !slices.Equal(got1, []int{0, 1, 2, 3, 4}) {
		t.Errorf("the active member handled %v, want 0..4", got1)
	}
	// Message 4 was unsettled when the member died: the standby gets it
	// again first (redelivered), then the rest, in order.
	if !slices.Equal(got2, []int{4, 5, 6, 7, 8, 9}) || !redo[0] {
		t.Errorf("the standby handled %v (redelivered %v), want 4 (redelivered) … 9 in order", got2, redo)
	}
}

// The active member's connection closes under it (driver.Conn.Close: no
// drain, no recovery).
func TestGroupStandbyTakesOverInOrder(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		runGroup(t, url, func(t *testing.T, active *acemq.Conn, _ string) {
			if err := active.Raw(func(dc driver.Conn) error { return dc.Close() }); err != nil {
				t.Fatal(err)
			}
		})
	})
}

// The broker kills the active member's connection (only that one); the
// member reconnects as a standby while the other continues in order.
func TestFaultGroupActiveMemberKilled(t *testing.T) {
	testenv.Faults(t)
	runGroup(t, testenv.AMQPURL(t), func(t *testing.T, _ *acemq.Conn, name string) {
		if testenv.CloseConnection(t, name) == 0 {
			t.Fatal("no connection named " + name + " to close")
		}
	})
}
