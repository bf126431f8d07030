package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/internal/cli"
	"github.com/acemq/acemq/memory"
	"github.com/acemq/acemq/rpc"
)

// ask says whether the responder refused the request (rpc.Refuse) or
// failed; both exit 2.
func TestAskRefusedOrFailed(t *testing.T) {
	check := func(t *testing.T, url string, conn *acemq.Conn, ask func(args ...string) (int, string)) {
		q := testQueue(t, conn, "ask-refused")
		deleteAtEnd(t, conn, contract.DeadLetterQueue(q), contract.ParkedQueue(q))
		responder, err := rpc.Serve(context.Background(), conn, q, func(_ context.Context, m acemq.Message[map[string]string]) (map[string]string, error) {
			if m.Payload["sku"] == "Z-9" {
				return nil, rpc.Refuse(errors.New("no price for Z-9"))
			}
			return nil, errors.New("the price table is down")
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = responder.Close(context.Background()) })
		for _, c := range []struct{ sku, want string }{
			{"Z-9", "the responder refused the request: Error: no price for Z-9"},
			{"A-1", "the responder failed: Error: the price table is down"},
		} {
			code, stderr := ask("ask", "--url", url, "--exchange", "", "--routing-key", q, `{"sku":"`+c.sku+`"}`)
			if code != cli.ExitResponder || !strings.Contains(stderr, c.want) {
				t.Errorf("%s: exit %d, stderr %q; want %d and %q", c.sku, code, stderr, cli.ExitResponder, c.want)
			}
		}
	}
	t.Run("memory", func(t *testing.T) {
		url := "memory://ask-refused-" + cli.Suffix()
		t.Cleanup(func() { memory.Reset(url) })
		conn, err := acemq.Connect(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close(context.Background()) })
		check(t, url, conn, func(args ...string) (int, string) {
			var out, errb bytes.Buffer
			code := run(context.Background(), args, strings.NewReader(""), &out, &errb)
			return code, errb.String()
		})
	})
	t.Run("rabbitmq", func(t *testing.T) {
		conn, url := brokerConn(t)
		check(t, url, conn, func(args ...string) (int, string) {
			r := runCLI(t, "", args...)
			return r.code, r.stderr
		})
	})
}
