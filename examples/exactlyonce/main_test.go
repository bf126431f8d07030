package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/memory"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func check(t *testing.T, out string) {
	t.Helper()
	for _, want := range []string{
		"the relay published 3 messages\n",
		"the relay published 3 copies, as after a crash\n",
		"deliveries: 3 acked, 3 duplicate\n",
		"charges: order-1=1250 order-2=700 order-3=9990\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %q:\n%s", want, out)
		}
	}
}

func TestRun(t *testing.T) {
	url := "memory://" + t.Name()
	t.Cleanup(func() { memory.Reset(url) })
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-url", url}, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	check(t, out.String())
}

func TestRunOnPostgres(t *testing.T) {
	dsn := testenv.PostgresDSN(t)
	url := "memory://" + t.Name()
	t.Cleanup(func() { memory.Reset(url) })
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-url", url, "-dsn", dsn}, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	check(t, out.String())
}
