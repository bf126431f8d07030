package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/cli"
	"github.com/acemq/acemq/topology"
)

func TestPartitionCommand(t *testing.T) {
	r := runCLI(t, "", "partition", "foobar", "--partitions", "7", "--base", "orders", "--json").wantCode(t, 0)
	lines := jsonLines(t, r.stdout)
	if len(lines) != 1 {
		t.Fatalf("partition --json printed %q", r.stdout)
	}
	got := lines[0]
	// FNV-1a("foobar") = 0xbf9cf968: its top bit is set, and the unsigned
	// rule puts it in partition 0 of 7 (Java's floorMod says 3, .NET's mask 5).
	if got["partition"] != json.Number("0") || got["routingKey"] != "orders.0" || got["hash"] != json.Number("3214735720") ||
		got["key"] != "foobar" || got["partitions"] != json.Number("7") {
		t.Errorf("partition --json = %v", got)
	}
	text := runCLI(t, "", "partition", "order-42", "--partitions", "12", "--base", "orders").wantCode(t, 0).stdout
	if !strings.Contains(text, "partition 8 of 12") || !strings.Contains(text, "orders.8") {
		t.Errorf("partition prints %q", text)
	}
	runCLI(t, "", "partition", "k", "--partitions", "0").wantCode(t, 1)
	runCLI(t, "", "partition", "--partitions", "3").wantCode(t, 1)
}

func TestConsumeOffset(t *testing.T) {
	conn, url := brokerConn(t)
	name := fmt.Sprintf("acemq-cli-test.stream.%s", cli.Suffix())
	deleteAtEnd(t, conn, name)
	ctx := context.Background()
	if err := topology.New().Queue(name, topology.WithQueueType(topology.QueueStream)).Apply(ctx, conn); err != nil {
		t.Fatal(err)
	}
	pub := acemq.NewPublisher[map[string]int](conn, "")
	for i := range 4 {
		if _, err := pub.Send(ctx, name, map[string]int{"n": i}); err != nil {
			t.Fatal(err)
		}
	}
	lines := jsonLines(t, runCLI(t, "", "consume", "--url", url, "--queue", name, "--offset", "first", "--count", "4", "--json").wantCode(t, 0).stdout)
	if len(lines) != 4 {
		t.Fatalf("consume --offset first read %d messages, want 4", len(lines))
	}
	var offs []string
	for i, l := range lines {
		off, ok := l["offset"].(json.Number)
		if !ok || l["body"] != fmt.Sprintf(`{"n":%d}`, i) {
			t.Fatalf("line %d: %v", i, l)
		}
		offs = append(offs, off.String())
	}
	// From the third message's offset: two messages; the stream keeps all.
	from := runCLI(t, "", "consume", "--url", url, "--queue", name, "--offset", offs[2], "--json").wantCode(t, 0).stdout
	if l := jsonLines(t, from); len(l) != 2 || l[0]["offset"] != json.Number(offs[2]) {
		t.Errorf("consume --offset %s read %v", offs[2], l)
	}
	text := runCLI(t, "", "consume", "--url", url, "--queue", name, "--offset", "last").wantCode(t, 0)
	if !strings.Contains(text.stdout, "offset="+offs[3]) || !strings.Contains(text.stderr, "read 1 message(s)") {
		t.Errorf("consume --offset last printed %q / %q", text.stdout, text.stderr)
	}
	runCLI(t, "", "consume", "--url", url, "--queue", name, "--offset", "next", "--count", "1", "--timeout", "300ms").wantCode(t, 3)
	runCLI(t, "", "consume", "--url", url, "--queue", name, "--offset", "sideways").wantCode(t, 1)
	runCLI(t, "", "consume", "--url", url, "--queue", name, "--offset", "first", "--requeue").wantCode(t, 1)
}
