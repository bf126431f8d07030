package console_test

import (
	"context"
	"fmt"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/console"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/topology"
)

// browser starts a headless Chromium (Debian's chromium package) for the
// test; without one the test is skipped, and fails in CI.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := os.Getenv("ACEMQ_TEST_CHROMIUM")
	if path == "" {
		for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
			if p, err := exec.LookPath(name); err == nil {
				path = p
				break
			}
		}
	}
	if path == "" {
		if testenv.InCI() {
			t.Fatal("no Chromium to run the browser tests in (apt-get install -y chromium, or set ACEMQ_TEST_CHROMIUM)")
		}
		t.Skip("no Chromium: apt-get install -y chromium (or set ACEMQ_TEST_CHROMIUM)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // as root in CI
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.WindowSize(1280, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(func() {
		cancelTimeout()
		cancel()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	return ctx
}

// run runs browser actions, failing the test with what was being done.
func run(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
		t.Fatalf("%s: %v\nthe page reads:\n%s", what, err, text)
	}
}

// get runs one browser action that returns a value.
func get[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// eval evaluates a JavaScript expression on the page.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	return get(t, ctx, "evaluating "+expr, chromedp.Evaluate[T](expr))
}

// until waits for a JavaScript expression to hold on the page.
func until(expr string) chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(testenv.Patience))
}

// click clicks the element a CSS selector finds.
func click(sel string) chromedp.Action[chromedp.Void] { return chromedp.Click(chromedp.CSS(sel)) }

// shots is where screenshots go: docs/console/ when
// ACEMQ_UPDATE_SCREENSHOTS=1 (they are committed), else a temporary folder.
func shots(t *testing.T) string {
	if os.Getenv("ACEMQ_UPDATE_SCREENSHOTS") == "1" {
		return filepath.Join("..", "docs", "console")
	}
	return t.TempDir()
}

// screenshot saves the whole page as name.png.
func screenshot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	png := get(t, ctx, "taking the screenshot "+name, chromedp.FullScreenshot(100))
	if len(png) < 1000 || string(png[1:4]) != "PNG" {
		t.Fatalf("screenshot %s is not a PNG (%d bytes)", name, len(png))
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// neighbours declares two more queues for the screenshots of the list: one
// with retry rungs, a parked message and waiting messages, one with a
// consumer.
func neighbours(t *testing.T, conn *acemq.Conn) *topology.Topology {
	t.Helper()
	ctx := context.Background()
	topo := topology.New().
		Queue("payments.in", topology.WithDeadLettering(true), acemq.WithRetry(retry.Fixed(3, 5*time.Second).WaitInBrokerFrom(time.Second))).
		Queue("shipping.out", topology.WithDeadLettering(true))
	if err := topo.Apply(ctx, conn); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"payments.in", "payments.in", "payments.in.parked"} {
		if err := brokertest.Publish(ctx, conn, brokertest.Outbound{RoutingKey: q, ContentType: "application/json", Body: []byte(`{"amount":12}`),
			Envelope: acemq.MustEnvelope(acemq.Fields{Type: "payment.requested", Reason: "the body could not be decoded"})}); err != nil {
			t.Fatal(err)
		}
	}
	c, err := acemq.Consume(ctx, conn, "shipping.out", func(context.Context, acemq.Message[[]byte]) acemq.Ack { return acemq.Accept() })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { brokertest.Stop(t, c) })
	return topo
}

const groupCount = `document.querySelectorAll("section.group").length`

// groupOf is the data-group of the group whose key mentions text.
func groupOf(text string) string {
	return fmt.Sprintf(`([...document.querySelectorAll("section.group")].find(s => s.querySelector("h2").textContent.includes(%q)) || {dataset: {}}).dataset.group || ""`, text)
}

// statusSays waits for the action banner to say text.
func statusSays(text string) chromedp.Action[chromedp.Void] {
	return until(fmt.Sprintf(`document.getElementById("status").textContent.includes(%q)`, text))
}

// In a real browser: two reasons are two groups with the right counts;
// replaying one group puts exactly its messages back on the source and
// empties the group; delete asks first (and Cancel, by keyboard, deletes
// nothing); the queue list updates live.
func TestBrowser(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		ctx := browser(t)
		f := deadLetters(t, url, 3, 2)
		memory := strings.HasPrefix(url, "memory://")
		opts := []console.Option{console.WithQueues(f.queue), console.WithInterval(200 * time.Millisecond)}
		if memory {
			opts = append(opts, console.WithTopology(neighbours(t, f.conn)))
		}
		con, err := console.New(f.conn, opts...)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(con)
		t.Cleanup(func() { _ = con.Close(); srv.Close() })
		dir := shots(t)

		run(t, ctx, "opening the dead-letter queue", chromedp.Navigate(srv.URL+"/queues/"+f.dlq), until(groupCount+" === 2"))
		groups := eval[[][]any](t, ctx, `[...document.querySelectorAll("section.group")].map(s => [s.querySelector("h2").textContent, +s.querySelector(".count").textContent])`)
		if len(groups) != 2 || !strings.Contains(groups[0][0].(string), "QuantityError") || groups[0][1].(float64) != 3 ||
			!strings.Contains(groups[1][0].(string), "SKUError") || groups[1][1].(float64) != 2 {
			t.Fatalf("the page shows the groups %v, want QuantityError 3 and SKUError 2", groups)
		}
		qty, sku := eval[string](t, ctx, groupOf("QuantityError")), eval[string](t, ctx, groupOf("SKUError"))
		run(t, ctx, "opening a group's messages", click(`section[data-group="`+sku+`"] summary`))
		if memory {
			screenshot(t, ctx, dir, "queue")
		}

		// A message's own page.
		first := eval[string](t, ctx, `document.querySelector('section[data-group="`+sku+`"] tbody a').textContent`)
		run(t, ctx, "opening a message", click(`section[data-group="`+sku+`"] tbody a`), until(`!!document.getElementById("body")`))
		body := eval[string](t, ctx, `document.getElementById("body").textContent`)
		reason := eval[string](t, ctx, `document.getElementById("reason").textContent`)
		path := eval[string](t, ctx, `location.pathname`)
		if !strings.Contains(body, `"sku": "Z-`) || !strings.Contains(reason, "SKUError: no price for SKU Z-") || path != "/queues/"+f.dlq+"/messages/"+first {
			t.Errorf("the message page at %s shows reason %q, body %q", path, reason, body)
		}
		if memory {
			screenshot(t, ctx, dir, "message")
		}
		run(t, ctx, "going back", chromedp.NavigateBack(), until(groupCount+" === 2"))

		// Replay one group.
		run(t, ctx, "replaying the quantity group", click(`section[data-group="`+qty+`"] button[data-action="replay"]`),
			statusSays("Replayed 3 messages"), until(groupCount+" === 1"))
		testenv.Eventually(t, "the 3 replayed on "+f.queue, func() bool { return brokertest.Depth(t, f.conn, f.queue) == 3 })
		if got := peekIDs(t, f.conn, f.queue); !equalSets(got, f.qtyIDs) {
			t.Errorf("the source holds %v, want exactly the quantity group %v", got, f.qtyIDs)
		}
		// (The page may be looking at the queue, holding its messages.)
		testenv.Eventually(t, f.dlq+" holding the 2 of the other group", func() bool { return brokertest.Depth(t, f.conn, f.dlq) == 2 })

		// Export downloads the group's messages, and takes none.
		run(t, ctx, "exporting", click(`section[data-group="`+sku+`"] button[data-action="export"]`), statusSays("Exported 2 messages"))
		testenv.Eventually(t, f.dlq+" whole after the export", func() bool { return brokertest.Depth(t, f.conn, f.dlq) == 2 })

		// Delete asks first; Cancel (Enter on the focused button) deletes nothing.
		del := `section[data-group="` + sku + `"] button[data-action="delete"]`
		run(t, ctx, "asking to delete", click(del), until(`document.getElementById("confirm").open`))
		if memory {
			screenshot(t, ctx, dir, "delete")
		}
		run(t, ctx, "cancelling by keyboard", chromedp.KeyEvent(kb.Enter), statusSays("Nothing was deleted"))
		testenv.Eventually(t, f.dlq+" whole after a cancelled delete", func() bool { return brokertest.Depth(t, f.conn, f.dlq) == 2 })
		run(t, ctx, "deleting", click(del), until(`document.getElementById("confirm").open`),
			click("#confirm-ok"), statusSays("Deleted 2 messages"), until(groupCount+" === 0"))
		testenv.Eventually(t, f.dlq+" empty", func() bool { return brokertest.Depth(t, f.conn, f.dlq) == 0 })

		// The list updates without a reload.
		row := `document.querySelector('tr[data-queue="` + f.queue + `"]')`
		run(t, ctx, "opening the list", chromedp.Navigate(srv.URL+"/"), until(row+` && `+row+`.textContent.includes("0 .dlq")`))
		err = brokertest.Publish(context.Background(), f.conn, brokertest.Outbound{RoutingKey: f.dlq, ContentType: "application/json", Body: []byte(`{"id":"late"}`),
			Envelope: acemq.MustEnvelope(acemq.Fields{Type: "order.placed", Reason: "the handler rejected it: SKUError: no price for SKU late"})})
		if err != nil {
			t.Fatal(err)
		}
		run(t, ctx, "seeing the new dead letter live", until(row+`.textContent.includes("1 .dlq")`))
		if memory {
			screenshot(t, ctx, dir, "queues")
			run(t, ctx, "a phone's screen", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2)), chromedp.Navigate(srv.URL+"/queues/"+f.dlq), until(groupCount+" === 1"))
			screenshot(t, ctx, dir, "phone")
			run(t, ctx, "the list on a phone", chromedp.Navigate(srv.URL+"/"), until(row+` !== null`))
			screenshot(t, ctx, dir, "phone-queues")
		}
	})
}

// In a real browser, a console listening off loopback (on every
// interface) with a token refuses a page opened without it, and opening it
// with ?token= works and drops the token from the address.
func TestBrowserToken(t *testing.T) {
	ctx := browser(t)
	f := deadLetters(t, brokertest.MemoryURL(t), 1, 0)
	con, err := console.New(f.conn, console.WithQueues(f.queue), console.WithToken("tok-123"))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	if console.IsLoopback(ln.Addr().String()) {
		t.Fatalf("%s is loopback", ln.Addr())
	}
	srv := httptest.NewUnstartedServer(con)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(func() { _ = con.Close(); srv.Close() })
	srv.URL = "http://127.0.0.1:" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	run(t, ctx, "opening without the token", chromedp.Navigate(srv.URL+"/queues/"+f.dlq))
	text := eval[string](t, ctx, `document.body.innerText`)
	if !strings.Contains(text, "needs its token") {
		t.Errorf("without the token the page reads %q", text)
	}
	run(t, ctx, "opening with the token", chromedp.Navigate(srv.URL+"/queues/"+f.dlq+"?token=tok-123"), until(groupCount+" === 1"))
	path := eval[string](t, ctx, `location.pathname + location.search`)
	if path != "/queues/"+f.dlq {
		t.Errorf("the address is %q, want the token gone", path)
	}
}

// In a real browser: ticking two messages and replaying the selection
// moves those two; a message's own page replays just it, then returns to
// its queue.
func TestBrowserSelectedAndOne(t *testing.T) {
	ctx := browser(t)
	f := deadLetters(t, brokertest.MemoryURL(t), 4, 0)
	con, err := console.New(f.conn, console.WithQueues(f.queue))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(con)
	t.Cleanup(func() { _ = con.Close(); srv.Close() })
	run(t, ctx, "opening the queue", chromedp.Navigate(srv.URL+"/queues/"+f.dlq), until(groupCount+" === 1"), click("section.group summary"))
	ids := eval[[]string](t, ctx, `[...document.querySelectorAll("section.group tbody tr")].map(r => r.dataset.id)`)
	if len(ids) != 4 {
		t.Fatalf("the page lists %v", ids)
	}
	run(t, ctx, "ticking two", click(`tr[data-id="`+ids[0]+`"] input`), click(`tr[data-id="`+ids[2]+`"] input`),
		until(`document.getElementById("selection").textContent.includes("2 selected")`),
		click(`#selection button[data-action="replay"]`), statusSays("Replayed 2 messages"), until(`document.querySelector(".count").textContent === "2"`))
	got := peekIDs(t, f.conn, f.queue)
	if len(got) != 2 || !got[ids[0]] || !got[ids[2]] {
		t.Errorf("the source holds %v, want %s and %s", got, ids[0], ids[2])
	}

	run(t, ctx, "opening one", chromedp.Navigate(srv.URL+"/queues/"+f.dlq+"/messages/"+ids[1]), until(`!!document.getElementById("body")`),
		click(`button[data-action="replay"]`), statusSays("Replayed 1 message"), until(groupCount+" === 1"))
	if path := eval[string](t, ctx, `location.pathname`); path != "/queues/"+f.dlq {
		t.Errorf("after the replay the page is %s", path)
	}
	if got := peekIDs(t, f.conn, f.queue); len(got) != 3 || !got[ids[1]] {
		t.Errorf("the source holds %v, want %s among 3", got, ids[1])
	}
}
