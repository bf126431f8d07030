package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/cli"
	"github.com/acemq/acemq/internal/clustertest"
	"github.com/acemq/acemq/queues"
	"github.com/acemq/acemq/topology"
)

// benchReportOf parses bench --json output.
func benchReportOf(t *testing.T, out string) benchReport {
	t.Helper()
	var rep benchReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("bench --json printed %q: %v", out, err)
	}
	return rep
}

// checkResult checks one phase of a successful run.
func checkResult(t *testing.T, rep benchReport, phase, client string, n int) {
	t.Helper()
	for _, r := range rep.Results {
		if r.Phase != phase || r.Client != client {
			continue
		}
		if r.Messages != n || r.Errors != 0 || r.Rate <= 0 {
			t.Errorf("%s/%s: %+v", phase, client, r)
		}
		if !(r.P50 <= r.P95 && r.P95 <= r.P99 && r.P99 <= r.Max) {
			t.Errorf("%s/%s: percentiles out of order: %+v", phase, client, r)
		}
		return
	}
	t.Errorf("no %s/%s result in %+v", phase, client, rep.Results)
}

func TestBenchOnMemory(t *testing.T) {
	r := runCLI(t, "", "--url", "memory://bench-"+cli.Suffix(), "--messages", "300", "--size", "64", "--producers", "2", "--consumers", "2", "--rpc", "--requests", "50", "--json").wantCode(t, 0)
	rep := benchReportOf(t, r.stdout)
	if !rep.OK || rep.Messages != 300 || rep.Producers != 2 || rep.QueueType != "quorum" {
		t.Errorf("report %+v", rep)
	}
	checkResult(t, rep, "publish", "acemq", 300)
	checkResult(t, rep, "consume", "acemq", 300)
	checkResult(t, rep, "request", "acemq", 50)

	text := runCLI(t, "", "--url", "memory://bench-"+cli.Suffix(), "--messages", "50", "--queue-type", "classic").wantCode(t, 0)
	for _, want := range []string{"P50 MS", "P99 MS", "MAX MS", "publish", "consume", "every message was confirmed and delivered"} {
		if !strings.Contains(text.stdout, want) {
			t.Errorf("text report lacks %q:\n%s", want, text.stdout)
		}
	}
}

func TestBenchUsage(t *testing.T) {
	runCLI(t, "", "--url", "memory://x", "--size", "4").wantCode(t, 1)
	runCLI(t, "", "--url", "memory://x", "--queue-type", "stream").wantCode(t, 1)
	r := runCLI(t, "", "--url", "memory://x", "--compare-raw").wantCode(t, 1)
	if !strings.Contains(r.stderr, "amqp://") {
		t.Errorf("stderr %q", r.stderr)
	}
}

func TestBenchCompareRawOnRabbitMQ(t *testing.T) {
	conn, url := brokerConn(t)
	r := runCLI(t, "", "--url", url, "--messages", "500", "--size", "128", "--rpc", "--requests", "100", "--compare-raw", "--json").wantCode(t, 0)
	rep := benchReportOf(t, r.stdout)
	for _, c := range []string{"acemq", "raw", "raw-headers"} {
		checkResult(t, rep, "publish", c, 500)
		checkResult(t, rep, "consume", c, 500)
		checkResult(t, rep, "request", c, 100)
	}
	for name, rs := range map[string][]benchRatio{"ratios": rep.Ratios, "sameWorkRatios": rep.SameWorkRatios} {
		var phases []string
		for _, ra := range rs {
			phases = append(phases, ra.Phase)
			if ra.Throughput <= 0 || ra.P50 <= 0 {
				t.Errorf("%s: %+v", name, ra)
			}
		}
		if strings.Join(phases, ",") != "publish,consume,request" {
			t.Errorf("%s: phases %v", name, phases)
		}
	}
	// The ratios are the results divided, each by its own reference.
	rate := func(phase, client string) float64 {
		for _, r := range rep.Results {
			if r.Phase == phase && r.Client == client {
				return r.Rate
			}
		}
		return 0
	}
	if got, want := rep.SameWorkRatios[0].Throughput, rate("publish", "acemq")/rate("publish", "raw-headers"); got != want {
		t.Errorf("sameWorkRatios publish throughput %v, want acemq ÷ raw-headers = %v", got, want)
	}
	if got, want := rep.Ratios[0].Throughput, rate("publish", "acemq")/rate("publish", "raw"); got != want {
		t.Errorf("ratios publish throughput %v, want acemq ÷ raw = %v", got, want)
	}
	if !strings.Contains(rep.ReferenceNote, "sameWorkRatios") || !strings.Contains(rep.ReferenceNote, "contract's headers") {
		t.Errorf("referenceNote %q", rep.ReferenceNote)
	}
	// Its queues are gone.
	if !strings.HasPrefix(rep.QueuePrefix, "acemq-bench-") {
		t.Fatalf("queue prefix %q", rep.QueuePrefix)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, q := range []string{"acemq", "raw", "raw-headers", "rpc", "rpc-raw", "rpc-raw-headers", "acemq.dlq", "rpc.parked"} {
		if _, err := queues.Inspect(ctx, conn, rep.QueuePrefix+q); !errors.Is(err, acemq.ErrNotFound) {
			t.Errorf("bench left %s%s behind (%v)", rep.QueuePrefix, q, err)
			_ = topology.New().Queue(rep.QueuePrefix+q).Delete(ctx, conn)
		}
	}
}

func TestBenchMetricsAddr(t *testing.T) {
	r := runCLI(t, "", "--url", "memory://bench-"+cli.Suffix(), "--messages", "100", "--size", "64", "--metrics-addr", "127.0.0.1:0").wantCode(t, 0)
	if !strings.Contains(r.stderr, "metrics on http://127.0.0.1:") {
		t.Errorf("bench did not serve its metrics; stderr:\n%s", r.stderr)
	}
	// A taken address fails the command before it starts.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	r = runCLI(t, "", "--url", "memory://bench-"+cli.Suffix(), "--messages", "10", "--metrics-addr", ln.Addr().String()).wantCode(t, 1)
	if !strings.Contains(r.stderr, "--metrics-addr") {
		t.Errorf("stderr %q", r.stderr)
	}
}

// TestBenchReportJSONShape pins the names --json prints for the two
// references: they are an interface.
func TestBenchReportJSONShape(t *testing.T) {
	rep := benchReport{
		Results:        []benchResult{{Phase: "publish", Client: "raw-headers", Rate: 10}},
		Ratios:         []benchRatio{{Phase: "publish", Throughput: 0.5, P50: 2}},
		SameWorkRatios: []benchRatio{{Phase: "publish", Throughput: 0.9, P50: 1.1}},
		ReferenceNote:  referenceNote,
	}
	bs, err := cli.MarshalLine(rep)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(bs, &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"ratios", "sameWorkRatios"} {
		rs, ok := got[k].([]any)
		if !ok || len(rs) != 1 {
			t.Fatalf("%s = %v in %s", k, got[k], bs)
		}
		entry := rs[0].(map[string]any)
		if len(entry) != 3 || entry["phase"] != "publish" || entry["throughput"] == nil || entry["p50"] == nil {
			t.Errorf("%s entry %v: want phase, throughput, p50", k, entry)
		}
	}
	if got["referenceNote"] != referenceNote {
		t.Errorf("referenceNote = %v", got["referenceNote"])
	}
	// Without --compare-raw none of them is printed.
	bs, _ = cli.MarshalLine(benchReport{})
	for _, k := range []string{"ratios", "sameWorkRatios", "referenceNote"} {
		if strings.Contains(string(bs), `"`+k+`"`) {
			t.Errorf("%s printed without --compare-raw: %s", k, bs)
		}
	}
	var text strings.Builder
	printBench(&text, rep)
	for _, want := range []string{referenceNote, "SAME WORK THROUGHPUT", "BARE BODY THROUGHPUT", "0.90x", "0.50x"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, text.String())
		}
	}
}

func TestEndpointURL(t *testing.T) {
	list := "amqp://u:one@a/,amqp://u:two@b/"
	if got := endpointURL(list, "amqp://u:xxxxx@b/"); got != "amqp://u:two@b/" {
		t.Errorf("endpointURL = %q, want the second URL with its password", got)
	}
	if got := endpointURL(list, ""); got != "amqp://u:one@a/" {
		t.Errorf("endpointURL with no endpoint = %q, want the first", got)
	}
}

// TestClusterBench: acemq-bench --url n1,n2,n3 --compare-raw runs against
// the cluster and reports the node it used; the plain amqp091-go half
// dials the same node.
func TestClusterBench(t *testing.T) {
	nodes := clustertest.Nodes(t)
	list := clustertest.URLList(nodes)
	r := runCLI(t, "", "--url", list, "--messages", "2000", "--size", "256", "--compare-raw", "--json").wantCode(t, 0)
	rep := benchReportOf(t, r.stdout)
	if _, ok := clustertest.NodeAt(nodes, rep.Endpoint); !ok {
		t.Fatalf("bench reports the endpoint %q, not a node of the cluster", rep.Endpoint)
	}
	for _, c := range []string{"acemq", "raw"} {
		checkResult(t, rep, "publish", c, 2000)
		checkResult(t, rep, "consume", c, 2000)
	}
	text := runCLI(t, "", "--url", list, "--messages", "200", "--size", "64").wantCode(t, 0).stdout
	first := strings.SplitN(text, "\n", 2)[0]
	if !strings.Contains(first, fmt.Sprintf("/ (of amqp://guest:xxxxx@127.0.0.1:%d/,", nodes[0].Port)) {
		t.Errorf("the text report does not name the node: %q", first)
	}
	t.Logf("bench on the cluster: %s", first)
	t.Logf("bench --json: endpoint=%s results=%+v ratios=%+v", rep.Endpoint, rep.Results, rep.Ratios)
}

// TestURLList: acemq-bench reaches the broker through a --url list whose
// other node is dead, and reports the node it used without its password.
func TestURLList(t *testing.T) {
	_, url := brokerConn(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "amqp://guest:guest@" + ln.Addr().String() + "/"
	_ = ln.Close()
	list := dead + "," + url
	r := runCLI(t, "", "--url", list, "--messages", "50", "--size", "64", "--queue-type", "classic", "--json").wantCode(t, 0)
	if rep := benchReportOf(t, r.stdout); rep.Endpoint != driver.RedactURL(url) || rep.URL != driver.RedactURL(list) {
		t.Errorf("bench reports endpoint %q of %q, want %q of %q", rep.Endpoint, rep.URL, driver.RedactURL(url), driver.RedactURL(list))
	}
	if strings.Contains(r.stdout, ":guest@") {
		t.Errorf("bench shows a password: %s", r.stdout)
	}
}
