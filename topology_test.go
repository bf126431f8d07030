package acemq_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/queues"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/topology"
)

// fixtureApplicationTopology is the fixture's application topology in one
// expression: exchange orders (topic), queue orders.new (quorum, with
// dead-lettering), binding on order.*.
func fixtureApplicationTopology() *topology.Topology {
	return topology.New().
		Exchange("orders", topology.ExchangeTopic).
		Queue("orders.new", topology.WithDeadLettering(true)).
		Bind("orders", "orders.new", "order.*")
}

// declKey renders a declaration for set comparison: names, kinds,
// durability, flags, queue types and arguments, integers compared whatever
// their width.
func declKey(d topology.Declaration) string {
	args := func(t driver.Table) string {
		var parts []string
		for _, k := range slices.Sorted(mapsKeys(t)) {
			v := t[k]
			if n, ok := asInt64(v); ok {
				v = n
			}
			parts = append(parts, fmt.Sprintf("%s=%T:%v", k, v, v))
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	switch d.Kind {
	case topology.ExchangeDeclaration:
		e := d.Exchange
		return fmt.Sprintf("exchange %s kind=%s durable=%t autoDelete=%t internal=%t args=%s", e.Name, e.Kind, e.Durable, e.AutoDelete, e.Internal, args(e.Args))
	case topology.QueueDeclaration:
		q := d.Queue
		return fmt.Sprintf("queue %s durable=%t exclusive=%t autoDelete=%t args=%s", q.Name, q.Durable, q.Exclusive, q.AutoDelete, args(q.Args))
	default:
		b := d.Binding
		return fmt.Sprintf("binding %s -> %s key=%q args=%s", b.Exchange, b.Queue, b.RoutingKey, args(b.Args))
	}
}

func mapsKeys(t driver.Table) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range t {
			if !yield(k) {
				return
			}
		}
	}
}

// fixtureDecls turns the fixture's topology entries declared by one of the
// given parties into declarations. A queue of type quorum carries
// x-queue-type=quorum besides its listed arguments; classic carries none.
func fixtureDecls(t *testing.T, ft fixtureTopology, by ...string) []string {
	t.Helper()
	var out []string
	for _, e := range ft.Exchanges {
		if slices.Contains(by, e.DeclaredBy) {
			out = append(out, declKey(topology.Declaration{Kind: topology.ExchangeDeclaration, Exchange: driver.Exchange{Name: e.Name, Kind: e.Type, Durable: e.Durable}}))
		}
	}
	for _, q := range ft.Queues {
		if !slices.Contains(by, q.DeclaredBy) {
			continue
		}
		args := driver.Table{}
		for k, v := range q.Arguments {
			if n, ok := asInt64(v); ok {
				v = n
			}
			args[k] = v
		}
		switch q.Type {
		case "quorum":
			args["x-queue-type"] = "quorum"
		case "classic":
		default:
			t.Fatalf("fixture queue %s has type %q", q.Name, q.Type)
		}
		out = append(out, declKey(topology.Declaration{Kind: topology.QueueDeclaration, Queue: driver.Queue{Name: q.Name, Durable: q.Durable, Args: args}}))
	}
	for _, b := range ft.Bindings {
		if slices.Contains(by, b.DeclaredBy) {
			out = append(out, declKey(topology.Declaration{Kind: topology.BindingDeclaration, Binding: driver.Binding{Exchange: b.Exchange, Queue: b.Queue, RoutingKey: b.RoutingKey}}))
		}
	}
	slices.Sort(out)
	return out
}

func declKeys(ds []topology.Declaration) []string {
	out := make([]string, 0, len(ds))
	for _, d := range ds {
		out = append(out, declKey(d))
	}
	slices.Sort(out)
	return out
}

func diffSets(t *testing.T, what string, got, want []string) {
	t.Helper()
	for i := 1; i < len(got); i++ {
		if got[i] == got[i-1] {
			t.Errorf("%s: declared twice: %s", what, got[i])
		}
	}
	got = slices.Compact(slices.Clone(got))
	for _, g := range got {
		if !slices.Contains(want, g) {
			t.Errorf("%s: extra declaration %s", what, g)
		}
	}
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("%s: missing declaration %s", what, w)
		}
	}
}

// TestContractTopologyDerivation checks the fixture's topology section
// against the test's own derivation of the policy and the names.
func TestContractTopologyDerivation(t *testing.T) {
	ft := loadContract(t).Topology
	q := ft.SourceQueue
	_, m := parsePolicy(t, ft.Policy)
	if fmt.Sprint(m.schedule()) != fmt.Sprint(ft.PolicyScheduleMillis) {
		t.Errorf("schedule: fixture %v, independent derivation %v", ft.PolicyScheduleMillis, m.schedule())
	}
	if fmt.Sprint(m.rungs()) != fmt.Sprint(ft.PolicyRungDelaysMillis) {
		t.Errorf("rungs: fixture %v, independent derivation %v", ft.PolicyRungDelaysMillis, m.rungs())
	}
	// The consumer's part derived from first principles (docs/wire.md §5.1, §5.4).
	want := []topology.Declaration{
		{Kind: topology.ExchangeDeclaration, Exchange: driver.Exchange{Name: "acemq.dlx", Kind: "direct", Durable: true}},
		{Kind: topology.QueueDeclaration, Queue: driver.Queue{Name: q + ".dlq", Durable: true, Args: driver.Table{}}},
		{Kind: topology.QueueDeclaration, Queue: driver.Queue{Name: q + ".parked", Durable: true, Args: driver.Table{}}},
		{Kind: topology.BindingDeclaration, Binding: driver.Binding{Exchange: "acemq.dlx", Queue: q + ".dlq", RoutingKey: q + ".dlq"}},
		{Kind: topology.BindingDeclaration, Binding: driver.Binding{Exchange: "acemq.dlx", Queue: q + ".parked", RoutingKey: q + ".parked"}},
		{Kind: topology.ExchangeDeclaration, Exchange: driver.Exchange{Name: "acemq.retry", Kind: "direct", Durable: true}},
		{Kind: topology.BindingDeclaration, Binding: driver.Binding{Exchange: "acemq.retry", Queue: q, RoutingKey: q}},
	}
	for _, d := range m.rungs() {
		want = append(want, topology.Declaration{Kind: topology.QueueDeclaration, Queue: driver.Queue{Name: modelRung(q, d), Durable: true, Args: driver.Table{
			"x-message-ttl": d, "x-dead-letter-exchange": "acemq.retry", "x-dead-letter-routing-key": q,
		}}})
	}
	diffSets(t, "fixture consumer+both vs derivation", fixtureDecls(t, ft, "consumer", "both"), declKeys(want))
	// The application's part: its exchange, its queue (quorum, dead-lettered),
	// its binding, and the dead-letter half.
	app := []topology.Declaration{
		{Kind: topology.ExchangeDeclaration, Exchange: driver.Exchange{Name: "orders", Kind: "topic", Durable: true}},
		{Kind: topology.QueueDeclaration, Queue: driver.Queue{Name: q, Durable: true, Args: driver.Table{
			"x-queue-type": "quorum", "x-dead-letter-exchange": "acemq.dlx", "x-dead-letter-routing-key": q + ".dlq",
		}}},
		{Kind: topology.BindingDeclaration, Binding: driver.Binding{Exchange: "orders", Queue: q, RoutingKey: "order.*"}},
	}
	app = append(app, want[:5]...)
	diffSets(t, "fixture topology+both vs derivation", fixtureDecls(t, ft, "topology", "both"), declKeys(app))
}

// TestContractTopologyDeclaredByConsumer starts a consumer with the
// fixture's policy against a transport that records declarations: the
// recorded set must be exactly the entries declared by "consumer" or
// "both".
func TestContractTopologyDeclaredByConsumer(t *testing.T) {
	ft := loadContract(t).Topology
	conn, rec := connectRecording(t)
	ctx := context.Background()
	// The application's topology first (the consumer never declares its
	// queue, so it must exist).
	if err := fixtureApplicationTopology().Apply(ctx, conn); err != nil {
		t.Fatal(err)
	}
	rec.take()

	policy, _ := parsePolicy(t, ft.Policy)
	c, err := acemq.Consume(ctx, conn, ft.SourceQueue, func(context.Context, acemq.Message[order]) acemq.Ack { return acemq.Accept() }, acemq.WithRetry(policy))
	if err != nil {
		t.Fatal(err)
	}
	got := declKeys(rec.take())
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	diffSets(t, "consumer", got, fixtureDecls(t, ft, "consumer", "both"))

	// NoDeclare declares nothing at all.
	c, err = acemq.Consume(ctx, conn, ft.SourceQueue, func(context.Context, acemq.Message[order]) acemq.Ack { return acemq.Accept() }, acemq.WithRetry(policy), acemq.WithDeclarations(false))
	if err != nil {
		t.Fatal(err)
	}
	if got := rec.take(); len(got) != 0 {
		t.Errorf("NoDeclare declared %v", got)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestContractTopologyDeclaredByBuilder declares the fixture's application
// topology through the builder: exactly the "topology" and "both" entries.
func TestContractTopologyDeclaredByBuilder(t *testing.T) {
	ft := loadContract(t).Topology
	conn, rec := connectRecording(t)
	if err := fixtureApplicationTopology().Apply(context.Background(), conn); err != nil {
		t.Fatal(err)
	}
	diffSets(t, "topology", declKeys(rec.take()), fixtureDecls(t, ft, "topology", "both"))

	plan, err := fixtureApplicationTopology().Plan()
	if err != nil {
		t.Fatal(err)
	}
	diffSets(t, "plan", declKeys(plan), fixtureDecls(t, ft, "topology", "both"))

	// With the consumer's policy as well, the builder declares the union.
	policy, _ := parsePolicy(t, ft.Policy)
	plan, err = topology.New().
		Exchange("orders", topology.ExchangeTopic).
		Queue("orders.new", topology.WithDeadLettering(true), acemq.WithRetry(policy)).
		Bind("orders", "orders.new", "order.*").
		Plan()
	if err != nil {
		t.Fatal(err)
	}
	diffSets(t, "plan with retries", declKeys(plan), fixtureDecls(t, ft, "topology", "both", "consumer"))
}

func TestTopologyPlanOrderAndText(t *testing.T) {
	plan, err := fixtureApplicationTopology().Plan()
	if err != nil {
		t.Fatal(err)
	}
	// Exchanges, then queues, then bindings: every binding's exchange and
	// queue is declared before it.
	seen := map[string]bool{}
	last := topology.ExchangeDeclaration
	rank := map[topology.DeclarationKind]int{topology.ExchangeDeclaration: 0, topology.QueueDeclaration: 1, topology.BindingDeclaration: 2}
	for _, d := range plan {
		if rank[d.Kind] < rank[last] {
			t.Errorf("%s comes after a %s", d, last)
		}
		last = d.Kind
		switch d.Kind {
		case topology.ExchangeDeclaration:
			seen["e:"+d.Exchange.Name] = true
		case topology.QueueDeclaration:
			seen["q:"+d.Queue.Name] = true
		case topology.BindingDeclaration:
			if !seen["e:"+d.Binding.Exchange] || !seen["q:"+d.Binding.Queue] {
				t.Errorf("%s comes before its exchange or queue", d)
			}
		}
	}
	text := plan.String()
	for _, want := range []string{
		"exchange orders (topic, durable)",
		"queue orders.new (quorum, durable) x-dead-letter-exchange=acemq.dlx x-dead-letter-routing-key=orders.new.dlq",
		"queue orders.new.dlq (classic, durable)",
		`binding orders -> orders.new on "order.*"`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("the plan does not read %q:\n%s", want, text)
		}
	}
}

func TestTopologyQueueTypes(t *testing.T) {
	queueOf := func(t *testing.T, opts ...topology.Option) (driver.Queue, error) {
		t.Helper()
		p, err := topology.New().Queue("q", opts...).Plan()
		if err != nil {
			return driver.Queue{}, err
		}
		for _, d := range p {
			if d.Kind == topology.QueueDeclaration && d.Queue.Name == "q" {
				return d.Queue, nil
			}
		}
		t.Fatal("no queue in the plan")
		return driver.Queue{}, nil
	}
	for _, c := range []struct {
		name    string
		opts    []topology.Option
		typ     string // "" = no x-queue-type
		durable bool
		refused string
	}{
		{"default durable is quorum", nil, "quorum", true, ""},
		{"classic on request", []topology.Option{topology.WithQueueType(topology.QueueClassic)}, "", true, ""},
		{"explicit quorum", []topology.Option{topology.WithQueueType(topology.QueueQuorum)}, "quorum", true, ""},
		{"exclusive is classic", []topology.Option{topology.WithExclusive()}, "", true, ""},
		{"auto-delete is classic", []topology.Option{topology.WithAutoDelete()}, "", true, ""},
		{"transient and exclusive is classic", []topology.Option{topology.WithDurable(false), topology.WithExclusive()}, "", false, ""},
		{"transient and not exclusive refused", []topology.Option{topology.WithDurable(false)}, "", false, "transient_nonexcl_queues"},
		{"transient auto-delete and not exclusive refused", []topology.Option{topology.WithDurable(false), topology.WithAutoDelete()}, "", false, "transient_nonexcl_queues"},
		{"quorum and exclusive refused", []topology.Option{topology.WithQueueType(topology.QueueQuorum), topology.WithExclusive()}, "", false, "exclusive"},
		{"quorum and auto-delete refused", []topology.Option{topology.WithQueueType(topology.QueueQuorum), topology.WithAutoDelete()}, "", false, "auto-delete"},
		{"quorum argument and exclusive refused", []topology.Option{topology.WithExclusive(), topology.WithArguments(driver.Table{"x-queue-type": "quorum"})}, "", false, "exclusive"},
		{"classic argument is written as none", []topology.Option{topology.WithArguments(driver.Table{"x-queue-type": "classic"})}, "", true, ""},
		{"explicit argument wins over the default", []topology.Option{topology.WithArguments(driver.Table{"x-queue-type": "stream"})}, "stream", true, ""},
		{"options and arguments disagree", []topology.Option{topology.WithQueueType(topology.QueueClassic), topology.WithArguments(driver.Table{"x-queue-type": "quorum"})}, "", false, "arguments"},
		{"dead-lettering refuses a caller's x-dead-letter-exchange", []topology.Option{topology.WithDeadLettering(true), topology.WithArguments(driver.Table{"x-dead-letter-exchange": "mine"})}, "", false, "x-dead-letter-exchange"},
		{"dead-lettering refuses a caller's x-dead-letter-routing-key", []topology.Option{topology.WithDeadLettering(true), topology.WithArguments(driver.Table{"x-dead-letter-routing-key": "mine"})}, "", false, "x-dead-letter-routing-key"},
	} {
		t.Run(c.name, func(t *testing.T) {
			q, err := queueOf(t, c.opts...)
			if c.refused != "" {
				if err == nil || !strings.Contains(err.Error(), c.refused) {
					t.Fatalf("err = %v, want a refusal naming %q", err, c.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			typ, has := q.Args["x-queue-type"]
			if (c.typ == "") == has || (has && typ != c.typ) {
				t.Errorf("x-queue-type = %v (present %v), want %q", typ, has, c.typ)
			}
			if q.Durable != c.durable {
				t.Errorf("durable = %v, want %v", q.Durable, c.durable)
			}
		})
	}
}

func TestTopologyValidate(t *testing.T) {
	for _, c := range []struct {
		name string
		topo *topology.Topology
		want string
	}{
		{"conflicting queue", topology.New().Queue("a").Queue("a", topology.WithQueueType(topology.QueueClassic)), "declared twice with different settings"},
		{"conflicting exchange", topology.New().Exchange("e", topology.ExchangeTopic).Exchange("e", topology.ExchangeDirect), "declared twice"},
		{"managed exchange redeclared differently", topology.New().Exchange("acemq.dlx", topology.ExchangeTopic).Queue("a", topology.WithDeadLettering(true)), "acemq.dlx"},
		{"amq. exchange", topology.New().Exchange("amq.mine", topology.ExchangeDirect), "amq."},
		{"unnamed exchange", topology.New().Exchange("", topology.ExchangeDirect), "needs a name"},
		{"unknown kind", topology.New().Exchange("e", "round-robin"), "unknown kind"},
		{"unnamed queue", topology.New().Queue(""), "needs a name"},
		{"default exchange binding", topology.New().Queue("a").Bind("", "a", "a"), "default exchange"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.topo.Validate()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Validate = %v, want an error containing %q", err, c.want)
			}
			if _, perr := c.topo.Plan(); perr == nil {
				t.Error("Plan accepted an invalid topology")
			}
			conn, rec := connectRecording(t)
			if aerr := c.topo.Apply(context.Background(), conn); aerr == nil {
				t.Error("Apply accepted an invalid topology")
			}
			if got := rec.take(); len(got) != 0 {
				t.Errorf("Apply of an invalid topology declared %v", got)
			}
		})
	}
	// Identical repeats merge; a queue declared by two dead-lettered
	// queues' halves shares acemq.dlx once.
	topo := topology.New().Queue("a", topology.WithDeadLettering(true)).Queue("b", topology.WithDeadLettering(true)).Queue("a", topology.WithDeadLettering(true))
	if err := topo.Validate(); err != nil {
		t.Fatal(err)
	}
	p, _ := topo.Plan()
	n := 0
	for _, d := range p {
		if d.Kind == topology.ExchangeDeclaration && d.Exchange.Name == "acemq.dlx" {
			n++
		}
	}
	if n != 1 || len(p) != 1+2*5 {
		t.Errorf("plan has %d acemq.dlx and %d entries:\n%s", n, len(p), p)
	}
}

func TestTopologyWithTopologyOption(t *testing.T) {
	conn, rec := connectRecording(t)
	ctx := context.Background()
	c, err := acemq.Consume(ctx, conn, "orders.new", func(context.Context, acemq.Message[order]) acemq.Ack { return acemq.Accept() },
		acemq.WithTopology(fixtureApplicationTopology()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	got := declKeys(rec.take())
	plan, _ := fixtureApplicationTopology().Plan()
	for _, w := range declKeys(plan) {
		if !slices.Contains(got, w) {
			t.Errorf("WithTopology did not declare %s", w)
		}
	}
	if _, err := acemq.Consume(ctx, conn, "orders.new", func(context.Context, acemq.Message[order]) acemq.Ack { return acemq.Accept() },
		acemq.WithTopology(fixtureApplicationTopology()), acemq.WithDeclarations(false)); err == nil {
		t.Error("NoDeclare with WithTopology was accepted")
	}
	if _, err := acemq.Consume(ctx, conn, "orders.new", func(context.Context, acemq.Message[order]) acemq.Ack { return acemq.Accept() },
		acemq.WithTopology(topology.New().Queue("orders.new", topology.WithQueueType(topology.QueueQuorum), topology.WithExclusive()))); err == nil {
		t.Error("an invalid topology did not refuse the consumer")
	}
}

func TestTopologyApplyDriftDelete(t *testing.T) {
	for _, b := range []backend{memoryBackend, rabbitBackend} {
		t.Run(b.name, func(t *testing.T) {
			conn := b.open(t)
			ctx := context.Background()
			sfx := randomHex(4)
			ex, q := "acemq-test-topo-"+sfx, "acemq-test-topo-"+sfx+".q"
			topo := topology.New().
				Exchange(ex, topology.ExchangeTopic).
				Queue(q, topology.WithDeadLettering(true), acemq.WithRetry(retry.Fixed(2, time.Second).WaitInBrokerFrom(time.Second))).
				Bind(ex, q, "order.*")
			t.Cleanup(func() {
				for _, n := range []string{q, q + ".dlq", q + ".parked", q + ".retry.1s"} {
					_, _ = brokertest.Driver(conn).DeleteQueue(ctx, n)
				}
				_ = brokertest.Driver(conn).DeleteExchange(ctx, ex)
			})

			// Before Apply: Drift creates nothing and reports the
			// application's exchange and queues missing.
			drift, err := topo.Drift(ctx, conn)
			if err != nil {
				t.Fatal(err)
			}
			missing := map[string]bool{}
			for _, d := range drift {
				if d.Kind == topology.DriftMissing {
					missing[d.Declaration.Name()] = true
				}
				if d.Declaration.Kind == topology.BindingDeclaration {
					t.Errorf("a binding was checked: %s", d)
				}
			}
			for _, n := range []string{ex, q, q + ".dlq", q + ".parked", q + ".retry.1s"} {
				if !missing[n] {
					t.Errorf("drift before Apply does not report %s missing: %v", n, drift)
				}
			}
			if _, err := queues.Inspect(ctx, conn, q); !errors.Is(err, acemq.ErrNotFound) {
				t.Fatalf("Drift created %s (inspect: %v)", q, err)
			}

			if err := topo.Apply(ctx, conn); err != nil {
				t.Fatal(err)
			}
			if err := topo.Apply(ctx, conn); err != nil {
				t.Fatalf("a second Apply: %v", err)
			}
			for _, opts := range [][]topology.DriftOption{nil, {topology.WithSettingsProbe()}} {
				drift, err := topo.Drift(ctx, conn, opts...)
				if err != nil || len(drift) != 0 {
					t.Errorf("drift after Apply (%d options): %v, %v", len(opts), drift, err)
				}
			}

			// The queue is replaced by a classic one: passive checks cannot
			// tell, the probe can.
			if _, err := brokertest.Driver(conn).DeleteQueue(ctx, q); err != nil {
				t.Fatal(err)
			}
			if _, err := brokertest.Driver(conn).DeclareQueue(ctx, driver.Queue{Name: q, Durable: true}); err != nil {
				t.Fatal(err)
			}
			drift, err = topo.Drift(ctx, conn)
			if err != nil || len(drift) != 0 {
				t.Errorf("passive drift saw settings: %v, %v", drift, err)
			}
			drift, err = topo.Drift(ctx, conn, topology.WithSettingsProbe())
			if err != nil {
				t.Fatal(err)
			}
			if len(drift) != 1 || drift[0].Kind != topology.DriftDifferent || drift[0].Declaration.Queue.Name != q {
				t.Errorf("probed drift = %v, want the queue %s different", drift, q)
			}
			err = topo.Apply(ctx, conn)
			var pe *driver.PreconditionError
			if !errors.As(err, &pe) {
				t.Errorf("Apply over a different queue: %v, want a *driver.PreconditionError", err)
			}

			// Delete removes what the topology declared, shared exchanges
			// aside, and is idempotent.
			for range 2 {
				if err := topo.Delete(ctx, conn); err != nil {
					t.Fatalf("Delete: %v", err)
				}
			}
			drift, err = topo.Drift(ctx, conn)
			if err != nil {
				t.Fatal(err)
			}
			missing = map[string]bool{}
			for _, d := range drift {
				missing[d.Declaration.Name()] = d.Kind == topology.DriftMissing
			}
			for _, n := range []string{ex, q, q + ".dlq", q + ".parked", q + ".retry.1s"} {
				if !missing[n] {
					t.Errorf("after Delete, %s is not missing: %v", n, drift)
				}
			}
			if missing[contract.DeadLetterExchange] || missing[contract.RetryExchange] {
				t.Errorf("Delete deleted a shared exchange: %v", drift)
			}
		})
	}
}
