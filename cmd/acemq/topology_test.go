package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/cli"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/memory"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/topology"
)

// cli runs acemq in this process (so that a memory:// broker outlives one
// command) and returns the exit code, standard output and standard error.
func inProcess(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

// wantJSON runs acemq and decodes its standard output, one JSON object.
func wantJSON(t *testing.T, v any, args ...string) {
	t.Helper()
	code, out, errs := inProcess(t, args...)
	if code != 0 {
		t.Fatalf("acemq %s: exit %d: %s", strings.Join(args, " "), code, errs)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("acemq %s printed %q: %v", strings.Join(args, " "), out, err)
	}
}

// keys are an object's keys, sorted.
func keys(m map[string]any) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

var (
	queueKeys       = []string{"autoDelete", "consumers", "durable", "exclusive", "messages", "name", "type", "unacked"}
	exchangeKeys    = []string{"autoDelete", "durable", "internal", "name", "type"}
	declarationKeys = []string{"kind", "name", "plan"}
)

type listedQueues struct {
	Source string           `json:"source"`
	Queues []map[string]any `json:"queues"`
}

func (l listedQueues) find(name string) map[string]any {
	for _, q := range l.Queues {
		if q["name"] == name {
			return q
		}
	}
	return nil
}

type listedExchanges struct {
	Source    string           `json:"source"`
	Exchanges []map[string]any `json:"exchanges"`
}

func (l listedExchanges) find(name string) map[string]any {
	for _, x := range l.Exchanges {
		if x["name"] == name {
			return x
		}
	}
	return nil
}

type declared struct {
	DryRun       bool             `json:"dryRun"`
	Declarations []map[string]any `json:"declarations"`
}

// plans are the plan lines of what the command declared.
func (d declared) plans() []string {
	var out []string
	for _, x := range d.Declarations {
		out = append(out, x["plan"].(string))
	}
	return out
}

type deleted struct {
	Deleted []struct {
		Kind     string `json:"kind"`
		Name     string `json:"name"`
		Messages int    `json:"messages"`
	} `json:"deleted"`
}

func (d deleted) names() []string {
	var out []string
	for _, x := range d.Deleted {
		out = append(out, x.Name)
	}
	return out
}

// checkTopologyCommands runs the topology commands on the broker at url;
// pub publishes body to q through the default exchange; routed reports
// whether a mandatory publish to exchange with key reaches a queue.
func checkTopologyCommands(t *testing.T, url, q, x string, pub func(q string), routed func(exchange, key string) bool) {
	t.Helper()
	policy := retry.Fixed(3, time.Minute)

	// declare: the library's plan, declared.
	var d declared
	wantJSON(t, &d, "queue", "declare", q, "--url", url, "--dead-lettering", "--retry", "fixed(3, 1m)", "--json")
	plan, err := topology.New().Queue(q, topology.WithDeadLettering(true), acemq.WithRetry(policy)).Plan()
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, p := range plan {
		want = append(want, p.String())
	}
	if d.DryRun || !slices.Equal(d.plans(), want) {
		t.Errorf("queue declare --json = %+v, want the plan\n%s", d, strings.Join(want, "\n"))
	}
	for _, decl := range d.Declarations {
		if !slices.Equal(keys(decl), declarationKeys) {
			t.Errorf("a declaration has keys %v, want %v", keys(decl), declarationKeys)
		}
	}

	// list: the queue and its halves, with their types.
	var l listedQueues
	wantJSON(t, &l, "queue", "list", "--url", url, "--json")
	for name, typ := range map[string]string{q: "quorum", contract.DeadLetterQueue(q): "classic", contract.ParkedQueue(q): "classic", contract.RungQueue(q, time.Minute): "classic"} {
		got := l.find(name)
		if got == nil {
			t.Errorf("queue list does not list %s", name)
			continue
		}
		if got["type"] != typ || got["durable"] != true {
			t.Errorf("queue list lists %s as %v, want a durable %s queue", name, got, typ)
		}
		if !slices.Equal(keys(got), queueKeys) {
			t.Errorf("a listed queue has keys %v, want %v", keys(got), queueKeys)
		}
	}

	// delete refuses a queue that holds a message, deleting nothing.
	pub(q)
	code, _, errs := inProcess(t, "queue", "delete", q, "--url", url, "--with-dead-letters")
	if code != 1 || !strings.Contains(errs, q+" holds 1 message") || !strings.Contains(errs, "--force") {
		t.Errorf("deleting a queue holding a message: exit %d, %s", code, errs)
	}
	l = listedQueues{}
	wantJSON(t, &l, "queue", "list", "--url", url, "--json")
	if l.find(q) == nil || l.find(contract.DeadLetterQueue(q)) == nil {
		t.Errorf("a refused delete deleted something: %+v", l)
	}

	// purge empties it.
	var p struct {
		Queue  string `json:"queue"`
		Purged int    `json:"purged"`
	}
	wantJSON(t, &p, "queue", "purge", q, "--url", url, "--json")
	if p.Queue != q || p.Purged != 1 {
		t.Errorf("queue purge --json = %+v, want 1 purged from %s", p, q)
	}
	if code, _, errs := inProcess(t, "queue", "purge", q+".missing", "--url", url); code != 1 || !strings.Contains(errs, "does not exist") {
		t.Errorf("purging a missing queue: exit %d, %s", code, errs)
	}

	// exchange, bind, unbind.
	var dx declared
	wantJSON(t, &dx, "exchange", "declare", x, "--url", url, "--type", "topic", "--json")
	if len(dx.Declarations) != 1 || dx.Declarations[0]["kind"] != "exchange" {
		t.Errorf("exchange declare --json = %+v", dx)
	}
	var lx listedExchanges
	wantJSON(t, &lx, "exchange", "list", "--url", url, "--json")
	if got := lx.find(x); got == nil || got["type"] != "topic" || !slices.Equal(keys(got), exchangeKeys) {
		t.Errorf("exchange list lists %s as %v (keys %v)", x, got, exchangeKeys)
	}
	if lx.find("") != nil || lx.find("amq.topic") == nil {
		t.Errorf("exchange list: want amq.topic and not the default exchange: %+v", lx)
	}
	wantJSON(t, &dx, "bind", "--url", url, "--exchange", x, "--queue", q, "--routing-key", "order.*", "--json")
	if !routed(x, "order.new") {
		t.Error("nothing is routed after bind")
	}
	var u map[string]any
	wantJSON(t, &u, "unbind", "--url", url, "--exchange", x, "--queue", q, "--routing-key", "order.*", "--json")
	if u["exchange"] != x || u["queue"] != q || u["routingKey"] != "order.*" {
		t.Errorf("unbind --json = %v", u)
	}
	if routed(x, "order.new") {
		t.Error("a message is routed after unbind")
	}
	var dd deleted
	wantJSON(t, &dd, "exchange", "delete", x, "--url", url, "--json")
	if !slices.Equal(dd.names(), []string{x}) || dd.Deleted[0].Kind != "exchange" {
		t.Errorf("exchange delete --json = %+v", dd)
	}
	if code, _, errs := inProcess(t, "exchange", "delete", x, "--url", url); code != 1 || !strings.Contains(errs, "does not exist") {
		t.Errorf("deleting a missing exchange: exit %d, %s", code, errs)
	}

	// delete with its halves, the rungs found by listing (the message
	// published after the purge was routed to q by the bind).
	pub(contract.DeadLetterQueue(q))
	if code, _, errs := inProcess(t, "queue", "delete", q, "--url", url, "--with-dead-letters"); code != 1 || !strings.Contains(errs, contract.DeadLetterQueue(q)+" holds 1 message") {
		t.Errorf("deleting with a dead letter: exit %d, %s", code, errs)
	}
	dd = deleted{}
	wantJSON(t, &dd, "queue", "delete", q, "--url", url, "--with-dead-letters", "--force", "--json")
	wantNames := []string{q, contract.DeadLetterQueue(q), contract.ParkedQueue(q), contract.RungQueue(q, time.Minute)}
	if !slices.Equal(dd.names(), wantNames) || dd.Deleted[1].Messages != 1 {
		t.Errorf("queue delete --json = %+v, want %v with the dead letter counted", dd, wantNames)
	}
	l = listedQueues{}
	wantJSON(t, &l, "queue", "list", "--url", url, "--json")
	for _, n := range wantNames {
		if l.find(n) != nil {
			t.Errorf("%s is still listed after delete", n)
		}
	}
	if code, _, errs := inProcess(t, "queue", "delete", q, "--url", url); code != 1 || !strings.Contains(errs, "does not exist") {
		t.Errorf("deleting a missing queue: exit %d, %s", code, errs)
	}
}

func TestTopologyCommandsOnMemory(t *testing.T) {
	url := "memory://" + testenv.Name(t)
	defer memory.Reset(url)
	conn, err := acemq.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	pub := func(q string) {
		if _, err := acemq.NewPublisher[string](conn, "").Send(context.Background(), q, "hello"); err != nil {
			t.Fatalf("publishing to %s: %v", q, err)
		}
	}
	routed := func(exchange, key string) bool {
		_, err := acemq.NewPublisher[string](conn, exchange).Send(context.Background(), key, "x")
		var ue *driver.ReturnError
		if err != nil && !errors.As(err, &ue) {
			t.Fatal(err)
		}
		return err == nil
	}
	checkTopologyCommands(t, url, "orders.new", "orders", pub, routed)

	var l listedQueues
	wantJSON(t, &l, "queue", "list", "--url", url, "--json")
	if l.Source != "memory" {
		t.Errorf("source %q, want memory", l.Source)
	}
}

func TestTopologyCommandsRabbitMQ(t *testing.T) {
	conn, url := brokerConn(t)
	sfx := cli.Suffix()
	q, x := "acemq-cli-test.topo."+sfx, "acemq-cli-test.topo-x."+sfx
	deleteAtEnd(t, conn, q, contract.DeadLetterQueue(q), contract.ParkedQueue(q), contract.RungQueue(q, time.Minute))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = topology.New().Exchange(x, topology.ExchangeTopic).Delete(ctx, conn)
	})
	pub := func(q string) {
		if _, err := acemq.NewPublisher[string](conn, "").Send(context.Background(), q, "hello"); err != nil {
			t.Fatalf("publishing to %s: %v", q, err)
		}
		// The management API samples its counts; the command checks with
		// a passive declaration, which is exact.
	}
	routed := func(exchange, key string) bool {
		_, err := acemq.NewPublisher[string](conn, exchange).Send(context.Background(), key, "x")
		var ue *driver.ReturnError
		if err != nil && !errors.As(err, &ue) {
			t.Fatal(err)
		}
		return err == nil
	}
	// The management API of the broker under test, not whichever answers
	// on HOST:15672 (another version's, on a machine running several).
	t.Setenv("ACEMQ_MANAGEMENT_URL", testenv.ManagementURL(t))
	checkTopologyCommands(t, url, q, x, pub, routed)

	var l listedQueues
	wantJSON(t, &l, "queue", "list", "--url", url, "--json")
	if l.Source != "management" {
		t.Errorf("source %q, want management", l.Source)
	}
	// The binary, as a user runs it: text output.
	r := runCLI(t, "", "exchange", "list", "--url", url).wantCode(t, 0)
	if !strings.HasPrefix(r.stdout, "NAME") || !strings.Contains(r.stdout, "amq.topic") {
		t.Errorf("exchange list printed:\n%s", r.stdout)
	}
}

// TestTopologyCommandsUsage: what is refused before anything is declared.
func TestTopologyCommandsUsage(t *testing.T) {
	// --dry-run connects to nothing.
	code, out, errs := inProcess(t, "queue", "declare", "q", "--dead-lettering", "--dry-run", "--url", "amqp://guest:guest@127.0.0.1:1/")
	if code != 0 || !strings.Contains(out, "would declare queue q.dlq (classic, durable)") {
		t.Errorf("--dry-run: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"queue"}, "needs a subcommand"},
		{[]string{"queue", "declare"}, "takes one queue name"},
		{[]string{"queue", "declare", "q", "--type", "lazy", "--dry-run"}, "--type"},
		{[]string{"queue", "declare", "q", "--max-priority", "5", "--dry-run"}, "priority queues are classic"},
		{[]string{"queue", "declare", "q", "--retry", "often", "--dry-run"}, "--retry"},
		{[]string{"queue", "declare", "q", "--arg", "novalue", "--dry-run"}, "--arg"},
		{[]string{"queue", "delete", "q", "--retry", "fixed(3, 1m)"}, "--with-dead-letters"},
		{[]string{"exchange", "declare", "x", "--dry-run"}, `"type" not set`},
		{[]string{"exchange", "declare", "amq.x", "--type", "topic", "--dry-run"}, "amq."},
		{[]string{"exchange", "delete", "acemq.dlx"}, "shared"},
		{[]string{"exchange", "delete", "amq.topic"}, "belongs to the broker"},
		{[]string{"bind", "--queue", "q"}, `"exchange"`},
		{[]string{"unbind", "--exchange", "x"}, `"queue"`},
	} {
		code, _, errs := inProcess(t, c.args...)
		if code != 1 || !strings.Contains(errs, c.want) {
			t.Errorf("acemq %s: exit %d, stderr %q; want 1 and %q", strings.Join(c.args, " "), code, errs, c.want)
		}
	}
}
