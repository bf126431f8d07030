package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/memory"
	"github.com/acemq/acemq/queues"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRun(t *testing.T) {
	url := "memory://" + t.Name()
	t.Cleanup(func() { memory.Reset(url) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	var page, groups string
	err := run(ctx, []string{"-url", url, "-listen", "127.0.0.1:0"}, &out, func(addr string) {
		go func() {
			defer cancel()
			conn, err := acemq.Connect(ctx, url)
			if err != nil {
				t.Error(err)
				return
			}
			defer conn.Close(context.Background())
			for { // the consumer dead-letters three invoices
				if info, err := queues.Inspect(ctx, conn, "invoices.in.dlq"); err == nil && info.Messages == 3 || ctx.Err() != nil {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			page = get(t, "http://"+addr+"/queues/invoices.in.dlq", "")
			_, rest, _ := strings.Cut(page, `name="acemq-console" content="`)
			guard, _, _ := strings.Cut(rest, `"`)
			groups = get(t, "http://"+addr+"/api/queues/invoices.in.dlq", guard)
		}()
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "/queues/invoices.in.dlq") || !strings.Contains(page, "<title>acemq console</title>") {
		t.Errorf("printed %q, served %q", out.String(), page)
	}
	if !strings.Contains(groups, `MissingCustomerError: invoice i-\u003cn\u003e names no customer","example"`) || !strings.Contains(groups, `"count":2`) || !strings.Contains(groups, "NegativeAmountError") {
		t.Errorf("the groups: %s", groups)
	}
}

func get(t *testing.T, url, guard string) string {
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("X-Acemq-Console", guard)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
