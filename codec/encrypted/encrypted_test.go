package encrypted

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/codec"
	"github.com/acemq/acemq/internal/allocbound"
	"github.com/acemq/acemq/internal/testenv"
)

func seq(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

func ring(t testing.TB, current string, keys map[string][]byte) *Keyring {
	t.Helper()
	r, err := NewKeyring(current, keys)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// The family test vector of docs/wire.md §4.2, written byte for byte.
func TestFamilyTestVector(t *testing.T) {
	c := Must(acemq.Bytes, ring(t, "2026-01", map[string][]byte{"2026-01": seq(32)}))
	c.rand = bytes.NewReader(seq(NonceSize))
	body, err := c.Encode([]byte("hello"))
	if err != nil {
		t.Fatal(err)
	}
	const want = "ae0107323032362d3031000102030405060708090a0b2f67ba77aa632797b83b1f88ef1394bb9ff6e85641"
	if got := hex.EncodeToString(body); got != want {
		t.Fatalf("body\n got %s\nwant %s", got, want)
	}
	if len(body) != 43 {
		t.Fatalf("body is %d bytes, want 43", len(body))
	}
	var back []byte
	if err := c.Decode(body, ContentType, &back); err != nil || string(back) != "hello" {
		t.Fatalf("Decode = %q, %v", back, err)
	}
	if id, ok := KeyIDOf(body); !ok || id != "2026-01" {
		t.Fatalf("KeyIDOf = %q, %t", id, ok)
	}
}

type interopFile struct {
	Keys map[string]struct {
		ID     string `json:"id"`
		Base64 string `json:"base64"`
	} `json:"keys"`
	Samples []struct {
		Library   string `json:"library"`
		Plaintext string `json:"plaintext"`
		KeyID     string `json:"keyId"`
		Key       string `json:"key"`
		Body      string `json:"body"`
	} `json:"samples"`
}

func loadInterop(t testing.TB) interopFile {
	t.Helper()
	raw, err := os.ReadFile(testenv.ContractFile(t, "crypto-interop-samples.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f interopFile
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	return f
}

// Every body the Java, Python and Ruby libraries wrote decodes, with a
// keyring holding both keys as a file, the way operators keep them.
func TestInteropSamplesDecode(t *testing.T) {
	f := loadInterop(t)
	if len(f.Samples) != 15 {
		t.Fatalf("the fixture has %d samples, want 15", len(f.Samples))
	}
	doc := map[string]any{"current": f.Keys["first"].ID, "keys": map[string]string{}}
	for _, k := range f.Keys {
		doc["keys"].(map[string]string)[k.ID] = k.Base64
	}
	raw, _ := json.Marshal(doc)
	path := filepath.Join(t.TempDir(), "keyring.json")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := LoadKeyringFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c := Must(acemq.Text, r)
	libs := map[string]int{}
	for i, s := range f.Samples {
		body, err := base64.StdEncoding.DecodeString(s.Body)
		if err != nil {
			t.Fatal(err)
		}
		if id, ok := KeyIDOf(body); !ok || id != s.KeyID {
			t.Errorf("sample %d (%s): KeyIDOf = %q, %t; want %q", i, s.Library, id, ok, s.KeyID)
		}
		var got string
		if err := c.Decode(body, ContentType, &got); err != nil {
			t.Errorf("sample %d (%s, key %s): %v", i, s.Library, s.KeyID, err)
			continue
		}
		if got != s.Plaintext {
			t.Errorf("sample %d (%s): plaintext %q, want %q", i, s.Library, got, s.Plaintext)
		}
		libs[s.Library]++
		// With only the other key, the same body fails naming its key id.
		other := "first"
		if s.Key == "first" {
			other = "second"
		}
		ok := f.Keys[other]
		only := ring(t, ok.ID, map[string][]byte{ok.ID: mustB64(t, ok.Base64)})
		err = Must(acemq.Text, only).Decode(body, ContentType, &got)
		var oe *OpenError
		if !errors.As(err, &oe) || oe.KeyID != s.KeyID || oe.OnRing {
			t.Errorf("sample %d with the other key only: %v, want an OpenError for %q not on the ring", i, err, s.KeyID)
		}
	}
	for _, lib := range []string{"java", "python", "ruby"} {
		if libs[lib] != 5 {
			t.Errorf("%d samples of %s decoded, want 5", libs[lib], lib)
		}
	}
}

func mustB64(t testing.TB, s string) []byte {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A keyring writes with its current key and reads with every key it
// holds: a body written before a rotation still reads after it.
func TestRotation(t *testing.T) {
	old := Must(acemq.JSON, ring(t, "2025-12", map[string][]byte{"2025-12": bytes.Repeat([]byte{1}, 32)}))
	body, err := old.Encode(map[string]int{"n": 1})
	if err != nil {
		t.Fatal(err)
	}
	rotated := Must(acemq.JSON, ring(t, "2026-01", map[string][]byte{
		"2026-01": bytes.Repeat([]byte{2}, 32),
		"2025-12": bytes.Repeat([]byte{1}, 32),
	}))
	var v map[string]int
	if err := rotated.Decode(body, ContentType, &v); err != nil || v["n"] != 1 {
		t.Fatalf("a body of the previous key: %v, %v", v, err)
	}
	fresh, _ := rotated.Encode(map[string]int{"n": 2})
	if id, _ := KeyIDOf(fresh); id != "2026-01" {
		t.Fatalf("a rotated ring writes under %q, want 2026-01", id)
	}
	if err := old.Decode(fresh, ContentType, &v); err == nil {
		t.Fatal("the old ring read a body of the new key")
	}
}

// 16-, 24- and 32-byte keys are read; only 32-byte keys write.
func TestKeySizes(t *testing.T) {
	for _, n := range []int{16, 24} {
		if _, err := NewKeyring("k", map[string][]byte{"k": seq(n)}); err == nil || !strings.Contains(err.Error(), "32-byte") {
			t.Errorf("a %d-byte current key: %v, want a refusal naming 32-byte keys", n, err)
		}
		// A sibling wrote with an n-byte key; a ring holding it reads.
		aead, err := newAEAD(seq(n))
		if err != nil {
			t.Fatal(err)
		}
		body := seal(aead, "short", seq(NonceSize), []byte(`"x"`))
		r := ring(t, "w", map[string][]byte{"w": seq(32), "short": seq(n)})
		var s string
		if err := Must(acemq.JSON, r).Decode(body, ContentType, &s); err != nil || s != "x" {
			t.Errorf("a %d-byte key: %q, %v", n, s, err)
		}
	}
	for _, n := range []int{0, 15, 31, 33} {
		if _, err := NewKeyring("k", map[string][]byte{"k": seq(32), "bad": seq(n)}); err == nil {
			t.Errorf("a %d-byte key was accepted", n)
		}
	}
	if _, err := NewKeyring("missing", map[string][]byte{"k": seq(32)}); err == nil {
		t.Error("a current key not among the keys was accepted")
	}
	if _, err := NewKeyring(strings.Repeat("x", 256), map[string][]byte{strings.Repeat("x", 256): seq(32)}); err == nil {
		t.Error("a 256-byte key id was accepted")
	}
}

// A wrong key and a tampered body give the same error, naming the key id
// and that it is on the ring; it is not retryable (the message is parked).
func TestWrongKeyAndTamperingAreTheSameFailure(t *testing.T) {
	writer := Must(acemq.Text, ring(t, "2026-01", map[string][]byte{"2026-01": seq(32)}))
	body, _ := writer.Encode("secret order")
	wrong := Must(acemq.Text, ring(t, "2026-01", map[string][]byte{"2026-01": bytes.Repeat([]byte{9}, 32)}))
	var s string
	errWrong := wrong.Decode(body, ContentType, &s)

	tampered := bytes.Clone(body)
	tampered[len(tampered)-20] ^= 1
	errTampered := writer.Decode(tampered, ContentType, &s)

	header := bytes.Clone(body)
	header[4] = 'X' // the key id is authenticated too: "2X26-01" is not on the ring
	errHeader := writer.Decode(header, ContentType, &s)

	for name, err := range map[string]error{"wrong key": errWrong, "tampered": errTampered} {
		var de *acemq.DecodeError
		var oe *OpenError
		if !errors.As(err, &de) || de.Retryable || !errors.As(err, &oe) || oe.KeyID != "2026-01" || !oe.OnRing {
			t.Errorf("%s: %v, want a non-retryable DecodeError with an OpenError for 2026-01 on the ring", name, err)
		}
	}
	if errWrong.Error() != errTampered.Error() {
		t.Errorf("a wrong key and a tampered body differ:\n%v\n%v", errWrong, errTampered)
	}
	var oe *OpenError
	if !errors.As(errHeader, &oe) || oe.KeyID != "2X26-01" || oe.OnRing {
		t.Errorf("a changed key id: %v", errHeader)
	}
	if !strings.Contains(errHeader.Error(), `"2X26-01", which is not on the keyring`) {
		t.Errorf("the message does not say the key is missing: %v", errHeader)
	}
}

func TestMalformedFrames(t *testing.T) {
	c := Must(acemq.Bytes, ring(t, "k", map[string][]byte{"k": seq(32)}))
	good, _ := c.Encode([]byte("x"))
	for name, body := range map[string][]byte{
		"empty":          nil,
		"not framed":     []byte(`{"id":1}`),
		"version 2":      append([]byte{Magic, 2}, good[2:]...),
		"zero id length": {Magic, Version, 0, 1, 2, 3},
		"id past end":    {Magic, Version, 200, 'k'},
		"no tag":         good[:len(good)-16],
		"legacy frame":   {0x01, 0x00, 0x01, 'k'},
	} {
		var b []byte
		err := c.Decode(body, ContentType, &b)
		var de *acemq.DecodeError
		if !errors.As(err, &de) || de.Retryable {
			t.Errorf("%s: %v, want a non-retryable DecodeError", name, err)
		}
		if _, ok := KeyIDOf(body); ok {
			t.Errorf("%s: KeyIDOf found a key id", name)
		}
	}
}

func TestAccepts(t *testing.T) {
	c := Must(acemq.JSON, ring(t, "k", map[string][]byte{"k": seq(32)}))
	for ct, want := range map[string]bool{
		"application/vnd.acemq.encrypted":                true,
		"Application/VND.AceMQ.Encrypted; charset=utf-8": true,
		"":                 false,
		"application/json": false,
	} {
		if c.Accepts(ct) != want {
			t.Errorf("Accepts(%q) = %t", ct, !want)
		}
	}
	if c.ContentType() != ContentType {
		t.Errorf("ContentType = %q", c.ContentType())
	}
}

// No formatting of a keyring shows a secret.
func TestSecretsNeverPrint(t *testing.T) {
	secret := bytes.Repeat([]byte{0xAB}, 32)
	r := ring(t, "2026-01", map[string][]byte{"2026-01": secret})
	b64 := base64.StdEncoding.EncodeToString(secret)
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("keys", "ring", r)
	slog.New(slog.NewTextHandler(&logged, nil)).Info("keys", "ring", r, "codec", Must(acemq.JSON, r))
	j, _ := json.Marshal(r)
	c := Must(acemq.JSON, r)
	outputs := []string{
		fmt.Sprint(r), fmt.Sprintf("%v %+v %#v %s %q %x %X", r, r, r, r, r, r, r), r.String(),
		fmt.Sprintf("%v %+v %#v %s", c, c, c, c), logged.String(), string(j),
	}
	for _, out := range outputs {
		for _, leak := range []string{b64, hex.EncodeToString(secret), "171, 171", "ab ab", "\xab\xab"} {
			if strings.Contains(strings.ToLower(out), strings.ToLower(leak)) {
				t.Errorf("the secret shows in %q", out)
			}
		}
		if !strings.Contains(out, "2026-01") {
			t.Errorf("the key id does not show in %q", out)
		}
	}
}

func TestParseKeyringErrorsNeverQuoteTheDocument(t *testing.T) {
	for name, doc := range map[string]string{
		"syntax":       `{"current": "k", "keys": {"k": "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2Vj`,
		"not base64":   `{"current": "k", "keys": {"k": "!!c2VjcmV0!!"}}`,
		"short key":    `{"current": "k", "keys": {"k": "c2VjcmV0"}}`,
		"no current":   `{"keys": {"k": "c2VjcmV0"}}`,
		"unknown":      `{"current": "k", "keys": {}, "secretField": 1}`,
		"wrong type":   `{"current": "k", "keys": ["c2VjcmV0"]}`,
		"empty":        ``,
		"two values":   `{"current": "k", "keys": {"k": "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="}} {}`,
		"current miss": `{"current": "x", "keys": {"k": "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="}}`,
	} {
		_, err := ParseKeyring([]byte(doc))
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		for _, leak := range []string{"c2Vj", "AAECAwQF", "!!"} {
			if strings.Contains(err.Error(), leak) {
				t.Errorf("%s: the error quotes the document: %v", name, err)
			}
		}
	}
}

func TestKeyringFromEnv(t *testing.T) {
	t.Setenv("ACEMQ_TEST_KEYRING", `{"current": "2026-01", "keys": {"2026-01": "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8"}}`)
	r, err := KeyringFromEnv("ACEMQ_TEST_KEYRING")
	if err != nil || r.Current() != "2026-01" || !r.Has("2026-01") {
		t.Fatalf("%v, %v", r, err)
	}
	if _, err := KeyringFromEnv("ACEMQ_TEST_KEYRING_UNSET"); err == nil || !strings.Contains(err.Error(), "ACEMQ_TEST_KEYRING_UNSET") {
		t.Fatalf("an unset variable: %v", err)
	}
}

func TestKeyringFromProvider(t *testing.T) {
	calls := map[string]int{}
	down := false
	p := func(_ context.Context, id string) ([]byte, error) {
		calls[id]++
		switch {
		case down:
			return nil, errors.New("the KMS is down")
		case id == "2026-01":
			return seq(32), nil
		case id == "2025-06":
			return bytes.Repeat([]byte{7}, 16), nil
		}
		return nil, fmt.Errorf("no key %q: %w", id, ErrUnknownKey)
	}
	r, err := KeyringFromProvider(context.Background(), "2026-01", p, 0)
	if err != nil {
		t.Fatal(err)
	}
	old := Must(acemq.Text, ring(t, "w", map[string][]byte{"w": seq(32), "2025-06": bytes.Repeat([]byte{7}, 16)}))
	aead, _, _, _ := old.ring.aead("2025-06")
	body := seal(aead, "2025-06", seq(NonceSize), []byte("old"))
	c := Must(acemq.Text, r)
	var s string
	down = true
	err = c.Decode(body, ContentType, &s)
	var de *acemq.DecodeError
	if !errors.As(err, &de) || !de.Retryable {
		t.Fatalf("a provider that is down: %v, want a retryable DecodeError", err)
	}
	down = false
	for range 2 {
		if err := c.Decode(body, ContentType, &s); err != nil || s != "old" {
			t.Fatalf("a key fetched from the provider: %q, %v", s, err)
		}
	}
	if calls["2025-06"] != 2 { // once down, once fetched, then kept
		t.Errorf("the provider was asked %d times for 2025-06, want 2", calls["2025-06"])
	}
	unknown := seal(aead, "gone", seq(NonceSize), []byte("x"))
	err = c.Decode(unknown, ContentType, &s)
	var oe *OpenError
	if !errors.As(err, &de) || de.Retryable || !errors.As(err, &oe) || oe.OnRing {
		t.Errorf("a key the provider does not know: %v", err)
	}
	if _, err := KeyringFromProvider(context.Background(), "nope", p, 0); err == nil {
		t.Error("a provider without the current key was accepted")
	}
}

func TestLoadKeyringFileErrors(t *testing.T) {
	if _, err := LoadKeyringFile(filepath.Join(t.TempDir(), "none.json")); err == nil {
		t.Error("a missing file was accepted")
	}
	p := filepath.Join(t.TempDir(), "k.json")
	_ = os.WriteFile(p, []byte(`{"current":"a","keys":{"a":"AAAA"}}`), 0o600)
	if _, err := LoadKeyringFile(p); err == nil || !strings.Contains(err.Error(), p) {
		t.Errorf("a short key: %v, want an error naming the file", err)
	}
}

// FuzzDecode feeds hostile bodies to the frame reader and the codec: no
// panic, no allocation sized by a length in the body, and a body that
// opens is one the key sealed.
func FuzzDecode(f *testing.F) {
	c := Must(acemq.Bytes, ring(f, "2026-01", map[string][]byte{"2026-01": seq(32)}))
	c.rand = bytes.NewReader(seq(NonceSize))
	good, _ := c.Encode([]byte("hello"))
	f.Add(good)
	f.Add([]byte{Magic, Version, 255})
	f.Add([]byte{Magic, Version, 0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, body []byte) {
		id, framed := KeyIDOf(body)
		if framed && (id == "" || len(id) > MaxKeyIDLen) {
			t.Fatalf("KeyIDOf = %q", id)
		}
		var out []byte
		var err error
		// Opening costs a copy of the plaintext and the frame's parse; the
		// wrapped codec's own bounds apply to the plaintext.
		allocbound.Check(t, len(body), 4, 16<<10, func() { err = c.Decode(body, ContentType, &out) })
		if err == nil && (!framed || id != "2026-01" || len(out) != len(body)-3-len(id)-NonceSize-TagSize) {
			t.Fatalf("opened %x as %x", body, out)
		}
	})
}

// The wrapped codec's bounds apply to the plaintext, and its error reaches
// the caller: errors.Is finds acemq.ErrTooDeep through the encryption.
func TestWrappedCodecBoundsApply(t *testing.T) {
	r := ring(t, "k", map[string][]byte{"k": seq(32)})
	c := Must(codec.JSON(codec.WithMaxDepth(2)), r)
	body, err := c.Encode(json.RawMessage(`[[[1]]]`))
	if err != nil {
		t.Fatal(err)
	}
	var v any
	err = c.Decode(body, ContentType, &v)
	var de *acemq.DecodeError
	if !errors.As(err, &de) || de.Retryable || !errors.Is(err, acemq.ErrTooDeep) {
		t.Fatalf("%v", err)
	}
}
