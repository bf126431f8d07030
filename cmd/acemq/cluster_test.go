package main

import (
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/clustertest"
)

// deadURL is an amqp:// URL where nothing listens.
func deadURL(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return "amqp://guest:guest@" + addr + "/"
}

// TestURLListOnEveryCommand: --url takes a comma-separated list; a node of
// it that is down costs nothing but a refused dial. publish, consume and
// bench reach the broker through a list whose other node is dead.
func TestURLListOnEveryCommand(t *testing.T) {
	conn, url := brokerConn(t)
	q := testQueue(t, conn, "urllist")
	list := deadURL(t) + "," + url
	runCLI(t, "", "publish", "--url", list, "--exchange", "", "--routing-key", q, "hello").wantCode(t, 0)
	lines := jsonLines(t, runCLI(t, "", "consume", "--url", list, "--queue", q, "--count", "1", "--json").wantCode(t, 0).stdout)
	if len(lines) != 1 {
		t.Fatalf("consume through a list printed %d lines", len(lines))
	}
	r := runCLI(t, "", "bench", "--url", list, "--messages", "50", "--size", "64", "--queue-type", "classic", "--json").wantCode(t, 0)
	if rep := benchReportOf(t, r.stdout); rep.Endpoint != driver.RedactURL(url) || rep.URL != driver.RedactURL(list) {
		t.Errorf("bench reports endpoint %q of %q, want %q of %q", rep.Endpoint, rep.URL, driver.RedactURL(url), driver.RedactURL(list))
	}
	if strings.Contains(r.stdout, ":guest@") {
		t.Errorf("bench shows a password: %s", r.stdout)
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

// TestClusterBench: acemq bench --url n1,n2,n3 --compare-raw runs against
// the cluster and reports the node it used; the plain amqp091-go half
// dials the same node.
func TestClusterBench(t *testing.T) {
	nodes := clustertest.Nodes(t)
	list := clustertest.URLList(nodes)
	r := runCLI(t, "", "bench", "--url", list, "--messages", "2000", "--size", "256", "--compare-raw", "--json").wantCode(t, 0)
	rep := benchReportOf(t, r.stdout)
	if _, ok := clustertest.NodeAt(nodes, rep.Endpoint); !ok {
		t.Fatalf("bench reports the endpoint %q, not a node of the cluster", rep.Endpoint)
	}
	for _, c := range []string{"acemq", "raw"} {
		checkResult(t, rep, "publish", c, 2000)
		checkResult(t, rep, "consume", c, 2000)
	}
	text := runCLI(t, "", "bench", "--url", list, "--messages", "200", "--size", "64").wantCode(t, 0).stdout
	first := strings.SplitN(text, "\n", 2)[0]
	if !strings.Contains(first, fmt.Sprintf("/ (of amqp://guest:xxxxx@127.0.0.1:%d/,", nodes[0].Port)) {
		t.Errorf("the text report does not name the node: %q", first)
	}
	t.Logf("bench on the cluster: %s", first)
	t.Logf("bench --json: endpoint=%s results=%+v ratios=%+v", rep.Endpoint, rep.Results, rep.Ratios)
}
