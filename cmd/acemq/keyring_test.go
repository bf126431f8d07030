package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/codec/encrypted"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/internal/cli"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/topology"
)

// interopKeys reads the two keys of the family's encryption samples and one
// sample body per key id.
func interopKeys(t *testing.T) (keys map[string]string, bodies map[string][]byte) {
	t.Helper()
	raw, err := os.ReadFile(testenv.ContractFile(t, "crypto-interop-samples.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Keys map[string]struct {
			ID     string `json:"id"`
			Base64 string `json:"base64"`
		} `json:"keys"`
		Samples []struct {
			Library, Plaintext, KeyID, Body string
		} `json:"samples"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	keys, bodies = map[string]string{}, map[string][]byte{}
	for _, k := range f.Keys {
		keys[k.ID] = k.Base64
	}
	for _, s := range f.Samples {
		if s.Library == "java" && (s.Plaintext == "hello" || s.Plaintext == "rotated") {
			b, _ := base64.StdEncoding.DecodeString(s.Body)
			bodies[s.Plaintext] = b
		}
	}
	return keys, bodies
}

func writeKeyring(t *testing.T, current string, keys map[string]string) string {
	t.Helper()
	raw, _ := json.Marshal(map[string]any{"current": current, "keys": keys})
	p := filepath.Join(t.TempDir(), "keyring.json")
	if err := os.WriteFile(p, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// publishRaw puts body on q with a content type, as another library would.
func publishRaw(t *testing.T, conn *acemq.Conn, q, contentType string, body []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pub := acemq.NewPublisher[[]byte](conn, "", acemq.WithCodec(cli.RawCodec{Type: contentType}))
	if _, err := pub.Send(ctx, q, body); err != nil {
		t.Fatal(err)
	}
}

func TestKeyringOnPublishConsumeAndReplay(t *testing.T) {
	keys, bodies := interopKeys(t)
	both := writeKeyring(t, "2026-01", keys)
	second := "orders-2025-06-rotated-out"
	onlySecond := writeKeyring(t, "2026-01x", map[string]string{second: keys[second], "2026-01x": base64.StdEncoding.EncodeToString(make([]byte, 32))})
	conn, url := brokerConn(t)
	q := testQueue(t, conn, "keyring")

	// publish --encrypt writes with the current key; a Java body and a
	// body under the rotated-out key join it.
	runCLI(t, "", "publish", "--url", url, "--exchange", "", "--routing-key", q, "--codec", "json", "--encrypt", "--keyring", both, `{"id": "o-1"}`).wantCode(t, 0)
	publishRaw(t, conn, q, encrypted.ContentType, bodies["hello"])
	publishRaw(t, conn, q, encrypted.ContentType, bodies["rotated"])

	// Without a keyring: the key ids, the bodies as they are.
	plain := jsonLines(t, runCLI(t, "", "consume", "--url", url, "--queue", q, "--requeue", "--json").wantCode(t, 0).stdout)
	if len(plain) != 3 {
		t.Fatalf("read %d, want 3", len(plain))
	}
	for i, want := range []string{"2026-01", "2026-01", second} {
		if plain[i]["keyId"] != want || plain[i]["decrypted"] != nil || plain[i]["bodyBase64"] == nil || plain[i]["contentType"] != encrypted.ContentType {
			t.Errorf("message %d without a keyring: %v", i, plain[i])
		}
	}
	eventually(t, "the messages back", func() bool { return queueDepth(t, conn, q) == 3 })
	text := runCLI(t, "", "consume", "--url", url, "--queue", q, "--requeue", "--keyring", both).wantCode(t, 0).stdout
	for _, want := range []string{"encrypted: key id 2026-01; decrypted with --keyring, the plaintext follows\n{\"id\":\"o-1\"}\n", "plaintext follows\nhello\n", "key id orders-2025-06-rotated-out; decrypted"} {
		if !strings.Contains(text, want) {
			t.Errorf("consume's text has no %q:\n%s", want, text)
		}
	}
	eventually(t, "the messages back", func() bool { return queueDepth(t, conn, q) == 3 })

	// A keyring without 2026-01: those two are reported on stderr with
	// their key id and left on the queue; the third is read and taken.
	r := runCLI(t, "", "consume", "--url", url, "--queue", q, "--json", "--keyring", onlySecond).wantCode(t, 1)
	lines := jsonLines(t, r.stdout)
	if len(lines) != 3 || lines[2]["body"] != "rotated" || lines[2]["decrypted"] != true {
		t.Fatalf("with the second key only: %v", r.stdout)
	}
	if strings.Count(r.stderr, "encrypted under key id 2026-01: that key is not on the keyring") != 2 || !strings.Contains(r.stderr, "2 of 3 message(s) could not be opened") {
		t.Errorf("stderr: %s", r.stderr)
	}
	eventually(t, "the unopened messages back", func() bool { return queueDepth(t, conn, q) == 2 })

	// The full keyring reads both: the CLI's own body and Java's.
	r = runCLI(t, "", "consume", "--url", url, "--queue", q, "--json", "--keyring", both).wantCode(t, 0)
	lines = jsonLines(t, r.stdout)
	if len(lines) != 2 || lines[0]["body"] != `{"id":"o-1"}` || lines[1]["body"] != "hello" || lines[0]["decrypted"] != true {
		t.Fatalf("with both keys: %v", r.stdout)
	}
	for _, out := range []string{r.stdout, r.stderr} {
		for _, k := range keys {
			if strings.Contains(out, k) {
				t.Fatalf("a key was printed: %s", out)
			}
		}
	}
	if n := queueDepth(t, conn, q); n != 0 {
		t.Errorf("%d left on %s", n, q)
	}

	// replay --keyring moves only what the keyring opens.
	dlq := contract.DeadLetterQueue(q)
	deleteAtEnd(t, conn, dlq)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := topology.New().Queue(dlq, topology.WithQueueType(topology.QueueClassic)).Apply(ctx, conn); err != nil {
		t.Fatal(err)
	}
	publishRaw(t, conn, dlq, encrypted.ContentType, bodies["hello"])
	publishRaw(t, conn, dlq, encrypted.ContentType, bodies["rotated"])
	publishRaw(t, conn, dlq, "text/plain", []byte("not encrypted"))
	r = runCLI(t, "", "replay", "--url", url, "--queue", dlq, "--keyring", onlySecond, "--json").wantCode(t, 0)
	res := jsonLines(t, r.stdout)
	if len(res) != 1 || res[0]["moved"] != json.Number("2") || res[0]["skipped"] != json.Number("1") {
		t.Fatalf("replay --keyring: %s / %s", r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "key id 2026-01") {
		t.Errorf("replay stderr: %s", r.stderr)
	}
	eventually(t, "the unopened message left on the dead-letter queue", func() bool { return queueDepth(t, conn, dlq) == 1 })
	eventually(t, "the moved ones on the queue", func() bool { return queueDepth(t, conn, q) == 2 })
}

func TestPublishCodecAndEncryptUsage(t *testing.T) {
	keys := writeKeyring(t, "k", map[string]string{"k": base64.StdEncoding.EncodeToString(make([]byte, 32))})
	base := []string{"publish", "--url", "memory://x", "--exchange", "", "--routing-key", "q"}
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"unknown codec":   {[]string{"--codec", "msgpack", "{}"}, `no codec is registered as "msgpack"`},
		"codec and type":  {[]string{"--codec", "json", "--content-type", "text/plain", "{}"}, "not both"},
		"not JSON":        {[]string{"--codec", "json", "not json"}, "the body is not JSON"},
		"encrypt alone":   {[]string{"--encrypt", "x"}, "--encrypt and --keyring go together"},
		"keyring alone":   {[]string{"--keyring", keys, "x"}, "--encrypt and --keyring go together"},
		"missing keyring": {[]string{"--encrypt", "--keyring", keys + ".none", "x"}, "opening the keyring"},
	} {
		r := runCLI(t, "", append(base, tc.args...)...)
		if r.code != 1 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want 1 and %q", name, r.code, r.stderr, tc.want)
		}
	}
	r := runCLI(t, "", "consume", "--url", "memory://x", "--queue", "q", "--keyring", keys+".none")
	if r.code != 1 || !strings.Contains(r.stderr, "--keyring") {
		t.Errorf("consume with a missing keyring: %d %q", r.code, r.stderr)
	}
}

// publish --codec writes each named format from a JSON body.
func TestPublishCodecs(t *testing.T) {
	conn, url := brokerConn(t)
	q := testQueue(t, conn, "codecs")
	body := `{"id": "o-1", "qty": 2, "items": ["a", "b"]}`
	want := map[string][2]string{
		"json": {"application/json", `{"id":"o-1","items":["a","b"],"qty":2}`},
		"yaml": {"application/yaml", "id: o-1\nitems:\n- a\n- b\nqty: 2\n"},
		"toml": {"application/toml", "id = 'o-1'\nitems = ['a', 'b']\nqty = 2\n"},
		"xml":  {"application/xml", "<message><id>o-1</id><items>a</items><items>b</items><qty>2</qty></message>"},
		"text": {"text/plain; charset=utf-8", body},
	}
	order := []string{"json", "yaml", "toml", "xml", "text"}
	for _, name := range order {
		runCLI(t, "", "publish", "--url", url, "--exchange", "", "--routing-key", q, "--codec", name, body).wantCode(t, 0)
	}
	lines := jsonLines(t, runCLI(t, "", "consume", "--url", url, "--queue", q, "--json").wantCode(t, 0).stdout)
	if len(lines) != len(order) {
		t.Fatalf("read %d, want %d", len(lines), len(order))
	}
	for i, name := range order {
		if lines[i]["contentType"] != want[name][0] || lines[i]["body"] != want[name][1] {
			t.Errorf("--codec %s: %v %q, want %v %q", name, lines[i]["contentType"], lines[i]["body"], want[name][0], want[name][1])
		}
	}
}
