package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/codec/encrypted"
	"github.com/acemq/acemq/console"
	"github.com/acemq/acemq/internal/cli"
	"github.com/acemq/acemq/internal/cli/clitest"
	consolecmd "github.com/acemq/acemq/internal/cli/console"
	"github.com/acemq/acemq/memory"
	"github.com/acemq/acemq/topology"
)

// startConsole serves the console on a memory broker with f, and returns
// its address and what it printed; it stops when the test ends. setup, when
// set, prepares the broker first.
func startConsole(t *testing.T, f consolecmd.Options, setup ...func(*acemq.Conn)) (addr string, printed func() string) {
	t.Helper()
	url := "memory://console-cli-" + cli.Suffix()
	t.Cleanup(func() { memory.Reset(url) })
	conn, err := acemq.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range setup {
		f(conn)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var out bytes.Buffer
	w := writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return out.Write(p) })
	ready := make(chan string, 1)
	done := make(chan error, 1)
	if f.PeekLimit == 0 {
		f.PeekLimit = console.DefaultPeekLimit
	}
	go func() { done <- consolecmd.Serve(ctx, w, io.Discard, conn, url, f, func(a string) { ready <- a }) }()
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("the console did not start: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serving: %v", err)
		}
		_ = conn.Close(context.Background())
	})
	return addr, func() string { mu.Lock(); defer mu.Unlock(); return out.String() }
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func status(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// Listening off loopback without --token makes one up: a request without
// it is refused, the printed address (which carries it) works.
func TestConsoleOffLoopbackNeedsToken(t *testing.T) {
	addr, printed := startConsole(t, consolecmd.Options{Listen: "0.0.0.0:0"})
	port := addr[strings.LastIndex(addr, ":"):]
	if st := status(t, "http://127.0.0.1"+port+"/"); st != http.StatusUnauthorized {
		t.Errorf("without the Token: %d, want 401", st)
	}
	out := printed()
	_, link, ok := strings.Cut(out, "acemq console on ")
	link, _, _ = strings.Cut(link, " ")
	if !ok || !strings.Contains(link, "?token=") {
		t.Fatalf("printed %q, want the address with its token", out)
	}
	token := link[strings.Index(link, "?token=")+len("?token="):]
	if len(token) < 32 {
		t.Errorf("a made-up token of %d characters", len(token))
	}
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar} // keeps the cookie ?token= sets
	resp, err := browser.Get("http://127.0.0.1" + port + "/?token=" + token)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Request.URL.RawQuery != "" {
		t.Errorf("with the Token: %d at %s", resp.StatusCode, resp.Request.URL)
	}
}

// On loopback no token is needed; a given --token is still required.
func TestConsoleLoopback(t *testing.T) {
	addr, printed := startConsole(t, consolecmd.Options{Listen: "127.0.0.1:0"})
	if st := status(t, "http://"+addr+"/"); st != http.StatusOK {
		t.Errorf("loopback: %d", st)
	}
	if strings.Contains(printed(), "token") {
		t.Errorf("printed a Token: %q", printed())
	}
	addr, _ = startConsole(t, consolecmd.Options{Listen: "127.0.0.1:0", Token: "given"})
	if st := status(t, "http://"+addr+"/"); st != http.StatusUnauthorized {
		t.Errorf("loopback with --token, without it: %d", st)
	}
}

func TestConsoleUsage(t *testing.T) {
	r := runCLI(t, "", "console", "--url", "memory://x", "--keyring", filepath.Join(t.TempDir(), "none.json")).wantCode(t, 1)
	if !strings.Contains(r.stderr, "--keyring") {
		t.Errorf("stderr %q", r.stderr)
	}
	r = runCLI(t, "", "console", "--url", "memory://x", "--peek-limit", "0").wantCode(t, 1)
	if !strings.Contains(r.stderr, "--peek-limit must be 1 or more") {
		t.Errorf("stderr %q", r.stderr)
	}
	r = runCLI(t, "", "console", "--url", "memory://x", "--peek-budget", "lots").wantCode(t, 1)
	if !strings.Contains(r.stderr, `--peek-budget "lots"`) {
		t.Errorf("stderr %q", r.stderr)
	}
	r = runCLI(t, "", "console", "--url", "memory://x", "--peek-budget", "1KiB").wantCode(t, 1)
	if !strings.Contains(r.stderr, "WithPeekBudget(1024): the budget must be at least") {
		t.Errorf("stderr %q", r.stderr)
	}
	r = runCLI(t, "", "console", "--url", "memory://x", "--listen", "nonsense").wantCode(t, 1)
	if !strings.Contains(r.stderr, "--listen nonsense") {
		t.Errorf("stderr %q", r.stderr)
	}
}

func TestManagementURL(t *testing.T) {
	for in, want := range map[string][2]string{
		"amqp://ops:pw@rabbit:5672/prod":     {"http://ops:pw@rabbit:15672/", "prod"},
		"amqp://rabbit":                      {"http://guest:guest@rabbit:15672/", "/"},
		"amqps://u:p@[::1]:5671/%2Fweird":    {"https://u:p@[::1]:15671/", "/weird"},
		"amqp://guest:guest@127.0.0.1:5672/": {"http://guest:guest@127.0.0.1:15672/", "/"},
	} {
		m, v, ok := cli.ManagementURL(in)
		if !ok || m != want[0] || v != want[1] {
			t.Errorf("managementURL(%q) = %q, %q, %t; want %q, %q", in, m, v, ok, want[0], want[1])
		}
	}
}

// With --keyring the console shows an encrypted dead letter decrypted;
// without it, the key id that would open it.
func TestConsoleKeyring(t *testing.T) {
	secret := bytes.Repeat([]byte{7}, 32)
	doc := fmt.Sprintf(`{"current": "k1", "keys": {"k1": %q}}`, base64.StdEncoding.EncodeToString(secret))
	path := filepath.Join(t.TempDir(), "keyring.json")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	ring, err := encrypted.ParseKeyring([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	var id string
	seed := func(conn *acemq.Conn) {
		ctx := context.Background()
		if err := topology.New().Queue("invoices", topology.WithDeadLettering(true)).Apply(ctx, conn); err != nil {
			t.Fatal(err)
		}
		pub := acemq.NewPublisher[map[string]any](conn, "", acemq.WithCodec(encrypted.Must(acemq.JSON, ring)))
		env, err := pub.Send(ctx, "invoices.dlq", map[string]any{"invoice": "i-1", "pence": 500})
		if err != nil {
			t.Fatal(err)
		}
		id = env.ID()
	}
	type detail struct {
		Decoded     bool   `json:"decoded"`
		DecodeError string `json:"decodeError"`
		BodyKind    string `json:"bodyKind"`
		Body        string `json:"body"`
	}
	read := func(addr string) detail {
		var d detail
		if err := json.Unmarshal([]byte(clitest.ConsoleGet(t, "http://"+addr, "/api/queues/invoices.dlq/messages/"+id)), &d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	addr, _ := startConsole(t, consolecmd.Options{Listen: "127.0.0.1:0", Keyring: path}, seed)
	if d := read(addr); !d.Decoded || d.BodyKind != "json" || !strings.Contains(d.Body, `"invoice": "i-1"`) {
		t.Errorf("with the Keyring: %+v", d)
	}
	addr, _ = startConsole(t, consolecmd.Options{Listen: "127.0.0.1:0"}, seed)
	if d := read(addr); d.Decoded || !strings.Contains(d.DecodeError, "key id k1") || d.BodyKind != "binary" {
		t.Errorf("without the Keyring: %+v", d)
	}
}
