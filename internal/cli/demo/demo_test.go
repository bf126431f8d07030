package demo

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq/console"
	"github.com/acemq/acemq/internal/cli"
	"github.com/acemq/acemq/internal/cli/clitest"
	consolecmd "github.com/acemq/acemq/internal/cli/console"
	"github.com/acemq/acemq/memory"
)

// demo --console serves the console on the demo's broker, with the
// dead-lettered order still in its .dlq, and replaying it from the console
// gets it accepted.
func TestDemoConsole(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url := "memory://demo-console-" + cli.Suffix()
	t.Cleanup(func() { memory.Reset(url) })
	var out bytes.Buffer
	var seen string
	ok, err := runDemoWith(ctx, url, &out, func(ctx context.Context, d *demo) error {
		cctx, stop := context.WithCancel(ctx)
		defer stop()
		f := consolecmd.Options{Listen: "127.0.0.1:0", PeekLimit: console.DefaultPeekLimit}
		var opts []console.Option
		for _, tp := range d.topos {
			opts = append(opts, console.WithTopology(tp))
		}
		return consolecmd.Serve(cctx, io.Discard, io.Discard, d.conn, url, f, func(addr string) {
			go func() {
				defer stop()
				dlq := "acemq-demo-" + d.sfx + ".orders.new.dlq"
				seen = clitest.ConsoleGet(t, "http://"+addr, "/api/queues/"+dlq)
				clitest.ConsolePost(t, "http://"+addr, "/api/queues/"+dlq+"/replay", `{"all":true}`)
				_ = d.expectQueue(ctx, dlq, 0)
			}()
		}, opts...)
	})
	if err != nil || !ok {
		t.Fatalf("demo: %v %v\n%s", ok, err, out.String())
	}
	if !strings.Contains(seen, "InvalidOrderError") || !strings.Contains(seen, `"count":1`) {
		t.Errorf("the console showed %s", seen)
	}
	if strings.Contains(out.String(), "step 5: replay — replay the dead-lettered") {
		t.Error("with the console, the demo replayed the dead letter itself")
	}
	if !strings.Contains(out.String(), "replayed from") {
		t.Errorf("the order replayed from the console was not accepted:\n%s", out.String())
	}
}
