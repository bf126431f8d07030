package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/acemq/acemq/memory"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRun(t *testing.T) {
	url := "memory://" + t.Name()
	t.Cleanup(func() { memory.Reset(url) })
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-url", url}, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	got := out.String()
	for _, want := range []string{
		"globex's reservation: rejected to reservations.dlq (an interceptor refused it: Error: tenant globex is not served here)\n",
		`level=WARN msg="acemq: the consumer's circuit breaker opened; the consumer is paused for the cool-down" queue=reservations why="2 failures in a row"`,
		"the breaker is ",
		"acemq: the consumer's circuit breaker is half open",
		`msg="acemq: the consumer's circuit breaker closed: the probe succeeded"`,
		"all 4 reserved; the breaker is closed; reservations.dlq holds 1 (the refused one)\n",
		`level=INFO msg="acemq: handled a message" queue=reservations message.type=reservations attempt=1 decision=accept`,
		`level=WARN msg="acemq: handled a message" queue=reservations message.type=reservations attempt=1 decision=retry error="the stock service is unavailable"`,
		`msg="acemq: the consumer is paused" queue=reservations by=application`,
		"paused: 1 waiting on reservations\n",
		"resumed: reserved sku-5\n",
		"without a tenant: acemq: a publish interceptor refused the message to exchange \"\" with routing key \"reservations\": a reservation needs a tenant in its context\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the output has no %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "dead_lettered") || strings.Contains(got, "exhausted") {
		t.Errorf("a reservation was dead-lettered:\n%s", got)
	}
}
