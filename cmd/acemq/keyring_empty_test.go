package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/codec/encrypted"
	"github.com/acemq/acemq/internal/cli"
	"github.com/acemq/acemq/internal/cli/clitest"
	consolecmd "github.com/acemq/acemq/internal/cli/console"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/memory"
	"github.com/acemq/acemq/topology"
)

// emptySamples are the family's bodies encrypted from an empty plaintext,
// by library.
func emptySamples(t *testing.T) map[string][]byte {
	t.Helper()
	raw, err := os.ReadFile(testenv.ContractFile(t, "crypto-interop-samples.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Samples []struct{ Library, Plaintext, Body string } `json:"samples"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, s := range f.Samples {
		if s.Plaintext == "" {
			b, err := base64.StdEncoding.DecodeString(s.Body)
			if err != nil {
				t.Fatal(err)
			}
			out[s.Library] = b
		}
	}
	if len(out) != 3 {
		t.Fatalf("the fixture has empty-plaintext samples from %d libraries, want 3 (java, python, ruby)", len(out))
	}
	return out
}

// A body encrypted from an empty plaintext is decrypted by consume
// --Keyring: an empty body, decrypted, never the ciphertext.
func TestConsumeKeyringEmptyPlaintext(t *testing.T) {
	keys, _ := interopKeys(t)
	ring := writeKeyring(t, "2026-01", keys)
	samples := emptySamples(t)
	check := func(t *testing.T, url string, conn *acemq.Conn, q string, consume func(args ...string) (int, string, string)) {
		for _, lib := range []string{"java", "python", "ruby"} {
			publishRaw(t, conn, q, encrypted.ContentType, samples[lib])
		}
		code, stdout, stderr := consume("consume", "--url", url, "--queue", q, "--json", "--requeue", "--keyring", ring)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		lines := jsonLines(t, stdout)
		if len(lines) != 3 {
			t.Fatalf("read %d messages, want 3:\n%s", len(lines), stdout)
		}
		for i, l := range lines {
			if l["decrypted"] != true || l["body"] != "" || l["bodyBase64"] != nil {
				t.Errorf("message %d: decrypted %v body %v bodyBase64 %v; want decrypted, an empty body", i, l["decrypted"], l["body"], l["bodyBase64"])
			}
		}
		eventually(t, "the messages back", func() bool { return queueDepth(t, conn, q) == 3 })
		code, stdout, _ = consume("consume", "--url", url, "--queue", q, "--keyring", ring)
		if code != 0 || strings.Count(stdout, "decrypted with --keyring, the plaintext follows") != 3 {
			t.Errorf("the text output (exit %d) does not say all three were decrypted:\n%s", code, stdout)
		}
	}
	t.Run("memory", func(t *testing.T) {
		url := "memory://keyring-empty-" + cli.Suffix()
		t.Cleanup(func() { memory.Reset(url) })
		conn, err := acemq.Connect(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close(context.Background()) })
		q := testQueue(t, conn, "keyring-empty")
		check(t, url, conn, q, func(args ...string) (int, string, string) {
			var out, errb bytes.Buffer
			code := run(context.Background(), args, strings.NewReader(""), &out, &errb)
			return code, out.String(), errb.String()
		})
	})
	t.Run("rabbitmq", func(t *testing.T) {
		conn, url := brokerConn(t)
		q := testQueue(t, conn, "keyring-empty")
		check(t, url, conn, q, func(args ...string) (int, string, string) {
			r := runCLI(t, "", args...)
			return r.code, r.stdout, r.stderr
		})
	})
}

// The console started with --keyring shows an empty plaintext as an empty,
// decoded body.
func TestConsoleKeyringEmptyPlaintext(t *testing.T) {
	keys, _ := interopKeys(t)
	ring := writeKeyring(t, "2026-01", keys)
	samples := emptySamples(t)
	var ids []string
	seed := func(conn *acemq.Conn) {
		ctx := context.Background()
		if err := topology.New().Queue("receipts", topology.WithDeadLettering(true)).Apply(ctx, conn); err != nil {
			t.Fatal(err)
		}
		for _, lib := range []string{"java", "python", "ruby"} {
			pub := acemq.NewPublisher[[]byte](conn, "", acemq.WithCodec(cli.RawCodec{Type: encrypted.ContentType}))
			env, err := pub.Send(ctx, "receipts.dlq", samples[lib])
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, env.ID())
		}
	}
	addr, _ := startConsole(t, consolecmd.Options{Listen: "127.0.0.1:0", Keyring: ring}, seed)
	for i, id := range ids {
		var d struct {
			Decoded     bool   `json:"decoded"`
			DecodeError string `json:"decodeError"`
			BodyKind    string `json:"bodyKind"`
			Body        string `json:"body"`
		}
		if err := json.Unmarshal([]byte(clitest.ConsoleGet(t, "http://"+addr, "/api/queues/receipts.dlq/messages/"+id)), &d); err != nil {
			t.Fatal(err)
		}
		if !d.Decoded || d.DecodeError != "" || d.Body != "" || d.BodyKind == "binary" {
			t.Errorf("sample %d: %+v; want decoded, an empty body", i, d)
		}
	}
}
