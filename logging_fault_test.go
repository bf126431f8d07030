package acemq_test

import (
	"context"
	"strings"
	"testing"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/testenv"
)

// TestFaultLoggerRecovery closes this test's own connection on RabbitMQ
// (found by its name; no other client's): the logger hears the loss, the
// reconnection, the recovery and the topology redeclared, with no password.
func TestFaultLoggerRecovery(t *testing.T) {
	testenv.Faults(t)
	url := testenv.AMQPURL(t)
	logs, l := newLog()
	name := testenv.Unique(t, "acemq-logger-fault")
	r := newPipeRig(t, url, acemq.WithLogger(l), acemq.WithName(name))
	r.consume(func(context.Context, acemq.Message[string]) acemq.Ack { return acemq.Accept() })
	closeConnectionNamed(t, name)
	for _, want := range []string{
		"the connection to the broker was lost",
		"reconnecting to the broker",
		"the connection to the broker recovered",
		"redeclared the connection's topology",
	} {
		testenv.Eventually(t, "the log line "+want, func() bool { return logs.find(t, want) != nil })
	}
	if line := logs.find(t, "was lost"); line["level"] != "WARN" || line["acemq.connection"] != name {
		t.Errorf("logged %v", line)
	}
	if strings.Contains(logs.String(), "guest:guest") {
		t.Errorf("a password reached the log: %s", logs)
	}
	r.send("after")
	if s := r.rec.Wait(t, 1)[0]; s.Outcome != acemq.OutcomeAcked {
		t.Errorf("after recovery: %+v", s)
	}
}

// closeConnectionNamed closes, with the rabbitmqctl of the broker under
// test, the broker connections whose connection_name is name.
func closeConnectionNamed(t *testing.T, name string) {
	t.Helper()
	testenv.RequireCtl(t)
	out, err := testenv.Ctl("list_connections", "-q", "--no-table-headers", "pid", "client_properties")
	if err != nil {
		t.Fatalf("%v", err)
	}
	closed := 0
	for _, line := range strings.Split(out, "\n") {
		pid, props, ok := strings.Cut(line, "\t")
		if !ok || !strings.Contains(props, `"`+name+`"`) {
			continue
		}
		if testenv.Rabbitmqctl(t, "close_connection", pid, "acemq logger fault test") {
			closed++
		}
	}
	if closed == 0 {
		t.Fatalf("no connection named %s among:\n%s", name, out)
	}
}
