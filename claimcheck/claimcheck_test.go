package claimcheck

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/codec"
	"github.com/acemq/acemq/internal/allocbound"
)

var uuidPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func payload(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + 3)
	}
	return b
}

// The worked sizes of docs/wire.md §4.1, with acemq.Bytes so the encoded length
// is the payload's length.
func TestFramingVectors(t *testing.T) {
	store := NewMemoryStore()
	c := Must(acemq.Bytes, store)

	below := payload(65535)
	body, err := c.Encode(below)
	if err != nil {
		t.Fatal(err)
	}
	if len(body) != 65538 {
		t.Fatalf("a 65,535-byte payload became a %d-byte body, want 65,538", len(body))
	}
	if !bytes.Equal(body[:3], []byte{0xAC, 0x01, 0x00}) {
		t.Fatalf("inline frame = % x, want ac 01 00", body[:3])
	}
	if !bytes.Equal(body[3:], below) {
		t.Fatal("the inline body is not the wrapped codec's bytes")
	}
	if store.Len() != 0 {
		t.Fatalf("an inline payload was stored (%d entries)", store.Len())
	}

	at := payload(65536)
	body, err = c.Encode(at)
	if err != nil {
		t.Fatal(err)
	}
	if len(body) != 39 {
		t.Fatalf("a 65,536-byte payload became a %d-byte body, want 39 (3 + 36)", len(body))
	}
	if !bytes.Equal(body[:3], []byte{0xAC, 0x01, 0x01}) {
		t.Fatalf("stored frame = % x, want ac 01 01", body[:3])
	}
	key := string(body[3:])
	if !uuidPattern.MatchString(key) {
		t.Fatalf("key %q is not a lowercase UUID v4", key)
	}
	got, err := store.Get(context.Background(), key)
	if err != nil || !bytes.Equal(got, at) {
		t.Fatalf("the store holds %d bytes under %q (err %v), want the 65,536-byte payload", len(got), key, err)
	}
	if k, ok := KeyOf(body); !ok || k != key {
		t.Fatalf("KeyOf = %q, %t; want %q, true", k, ok, key)
	}

	for _, b := range [][]byte{below, at} {
		enc, _ := c.Encode(b)
		var out []byte
		if err := c.Decode(enc, "application/octet-stream", &out); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out, b) {
			t.Fatalf("round trip of %d bytes gave %d bytes", len(b), len(out))
		}
	}
}

// Constant bodies written out by hand: a reader must take them whoever wrote them.
func TestDecodeConstantBodies(t *testing.T) {
	store := NewMemoryStore()
	if err := store.Put(context.Background(), "orders-o-4", []byte(`{"id":"o-4"}`)); err != nil {
		t.Fatal(err)
	}
	c := Must(acemq.JSON, store)
	cases := []struct {
		name string
		body []byte
		want string
	}{
		{"inline", append([]byte{0xAC, 0x01, 0x00}, `{"id":"o-1"}`...), "o-1"},
		{"stored", append([]byte{0xAC, 0x01, 0x01}, "orders-o-4"...), "o-4"},
		{"unframed", []byte(`{"id":"o-2"}`), "o-2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var v struct{ ID string }
			if err := c.Decode(tc.body, "application/json", &v); err != nil {
				t.Fatal(err)
			}
			if v.ID != tc.want {
				t.Fatalf("id = %q, want %q", v.ID, tc.want)
			}
		})
	}
}

func TestUnframedBodiesReachTheWrappedCodecUntouched(t *testing.T) {
	c := Must(acemq.Bytes, NewMemoryStore())
	for _, body := range [][]byte{
		nil,
		{},
		{0xAC},
		{0xAC, 0x01},
		{0xAC, 0x01, 0x02, 'x'}, // an unknown mode is not a frame
		{0xAC, 0x02, 0x00, 'x'}, // nor is another version
		{0x00, 0xAC, 0x01, 0x01},
		[]byte("plain text"),
	} {
		var out []byte
		if err := c.Decode(body, "", &out); err != nil {
			t.Fatalf("% x: %v", body, err)
		}
		if !bytes.Equal(out, body) {
			t.Fatalf("% x decoded to % x", body, out)
		}
		if IsFramed(body) {
			t.Fatalf("IsFramed(% x) = true", body)
		}
	}
}

func TestThreshold(t *testing.T) {
	if _, err := New(acemq.Bytes, NewMemoryStore(), WithThreshold(-1)); err == nil {
		t.Fatal("a negative threshold was accepted")
	}
	store := NewMemoryStore()
	zero := Must(acemq.Bytes, store, WithThreshold(0))
	body, err := zero.Encode([]byte{})
	if err != nil {
		t.Fatal(err)
	}
	if body[2] != Stored || store.Len() != 1 {
		t.Fatalf("threshold 0 did not offload an empty payload: % x, %d stored", body, store.Len())
	}
	small := Must(acemq.Bytes, store, WithThreshold(10))
	if b, _ := small.Encode(payload(9)); b[2] != Inline {
		t.Fatal("9 bytes under a threshold of 10 were not inline")
	}
	if b, _ := small.Encode(payload(10)); b[2] != Stored {
		t.Fatal("10 bytes under a threshold of 10 were not stored")
	}
	if _, err := New(nil, store); err == nil {
		t.Fatal("a nil codec was accepted")
	}
	if _, err := New(acemq.Bytes, nil); err == nil {
		t.Fatal("a nil store was accepted")
	}
	if _, err := New(acemq.Bytes, store, WithTimeout(0)); err == nil {
		t.Fatal("a zero timeout was accepted")
	}
}

func TestContentTypeIsTheWrappedCodecs(t *testing.T) {
	c := Must(acemq.JSON, NewMemoryStore())
	if c.ContentType() != "application/json" {
		t.Fatalf("content type %q", c.ContentType())
	}
	if !c.Accepts("application/json; charset=utf-8") || !c.Accepts("") || c.Accepts("text/plain") {
		t.Fatal("Accepts does not delegate to the JSON codec")
	}
	tc := Must(acemq.Text, NewMemoryStore())
	if tc.ContentType() != acemq.Text.ContentType() || tc.Accepts("application/json") {
		t.Fatal("the text codec's answers were not kept")
	}
}

func TestMissingKeyIsFatalAndNamesRetention(t *testing.T) {
	c := Must(acemq.Bytes, NewMemoryStore())
	body := append([]byte{0xAC, 0x01, 0x01}, "gone-1"...)
	var out []byte
	err := c.Decode(body, "application/octet-stream", &out)
	var de *acemq.DecodeError
	if !errors.As(err, &de) {
		t.Fatalf("err = %v, want a *acemq.DecodeError", err)
	}
	if de.Retryable {
		t.Fatal("a missing key was marked retryable")
	}
	var me *MissingError
	if !errors.As(err, &me) || me.Key != "gone-1" || !errors.Is(err, ErrNotFound) {
		t.Fatalf("err = %v, want a MissingError for gone-1 wrapping ErrNotFound", err)
	}
	want := "the claim-check store has no payload for key gone-1 (was it removed by retention?)"
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %q, want it to contain %q", err, want)
	}
}

func TestInvalidKeyInBodyIsFatal(t *testing.T) {
	c := Must(acemq.Bytes, failingStore{err: errors.New("must not be called")})
	for _, k := range []string{"", "../etc/passwd", ".hidden", "a/b", strings.Repeat("a", 129), "caf\xe9"} {
		var out []byte
		err := c.Decode(append([]byte{0xAC, 0x01, 0x01}, k...), "", &out)
		var de *acemq.DecodeError
		if !errors.As(err, &de) || de.Retryable {
			t.Fatalf("key %q: err = %v, want a non-retryable DecodeError", k, err)
		}
		if strings.Contains(err.Error(), "must not be called") {
			t.Fatalf("key %q reached the store", k)
		}
		if _, ok := KeyOf(append([]byte{0xAC, 0x01, 0x01}, k...)); ok {
			t.Fatalf("KeyOf accepted %q", k)
		}
	}
}

type failingStore struct{ err error }

func (f failingStore) Put(context.Context, string, []byte) error   { return f.err }
func (f failingStore) Get(context.Context, string) ([]byte, error) { return nil, f.err }
func (f failingStore) Delete(context.Context, string) error        { return f.err }

type blockingStore struct{ calls atomic.Int32 }

func (b *blockingStore) Put(ctx context.Context, _ string, _ []byte) error {
	b.calls.Add(1)
	<-ctx.Done()
	return ctx.Err()
}
func (b *blockingStore) Get(ctx context.Context, _ string) ([]byte, error) {
	b.calls.Add(1)
	<-ctx.Done()
	return nil, ctx.Err()
}
func (b *blockingStore) Delete(ctx context.Context, _ string) error { return nil }

func TestStoreFailureIsRetryable(t *testing.T) {
	boom := errors.New("connection refused")
	c := Must(acemq.Bytes, failingStore{err: boom})
	var out []byte
	err := c.Decode(append([]byte{0xAC, 0x01, 0x01}, "k1"...), "", &out)
	var de *acemq.DecodeError
	if !errors.As(err, &de) || !de.Retryable || !errors.Is(err, boom) {
		t.Fatalf("err = %v, want a retryable DecodeError wrapping the store's error", err)
	}
	if _, err := c.Encode(payload(DefaultThreshold)); !errors.Is(err, boom) {
		t.Fatalf("Encode with a failing store: err = %v, want the store's error", err)
	}
}

func TestStoreTimeoutIsRetryable(t *testing.T) {
	bs := &blockingStore{}
	c := Must(acemq.Bytes, bs, WithTimeout(20*time.Millisecond))
	var out []byte
	err := c.Decode(append([]byte{0xAC, 0x01, 0x01}, "k1"...), "", &out)
	var de *acemq.DecodeError
	if !errors.As(err, &de) || !de.Retryable || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want a retryable DecodeError wrapping the deadline", err)
	}
	if _, err := c.Encode(payload(DefaultThreshold)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Encode: err = %v, want the deadline", err)
	}
	if bs.calls.Load() != 2 {
		t.Fatalf("store called %d times, want 2", bs.calls.Load())
	}
}

func TestKeyGenerator(t *testing.T) {
	store := NewMemoryStore()
	c := Must(acemq.Bytes, store, WithThreshold(0), WithKeys(func() string { return "fixed-key" }))
	body, err := c.Encode([]byte("x"))
	if err != nil || string(body) != "\xac\x01\x01fixed-key" {
		t.Fatalf("body %q, err %v", body, err)
	}
	bad := Must(acemq.Bytes, store, WithThreshold(0), WithKeys(func() string { return "../x" }))
	if _, err := bad.Encode([]byte("x")); err == nil {
		t.Fatal("an invalid generated key was accepted")
	}
}

func TestWrappedCodecErrorsPassThrough(t *testing.T) {
	c := Must(acemq.JSON, NewMemoryStore())
	if _, err := c.Encode(make(chan int)); err == nil {
		t.Fatal("encoding a channel succeeded")
	}
	var v struct{}
	err := c.Decode(append([]byte{0xAC, 0x01, 0x00}, "{not json"...), "application/json", &v)
	var de *acemq.DecodeError
	if !errors.As(err, &de) || de.Retryable {
		t.Fatalf("err = %v, want the JSON codec's non-retryable DecodeError", err)
	}
}

func TestValidKey(t *testing.T) {
	good := []string{"a", "Z", "0", "a.b", "a_b", "a-b", "0123e4567-e89b-12d3-a456-426614174000", strings.Repeat("k", 128), "orders.o-4_v2"}
	bad := []string{"", ".", "..", "../x", "a/b", `a\b`, "-a", "_a", ".a", "a b", "a:b", strings.Repeat("k", 129), "ключ", "a\x00"}
	for _, k := range good {
		if !ValidKey(k) {
			t.Errorf("ValidKey(%q) = false", k)
		}
	}
	for _, k := range bad {
		if ValidKey(k) {
			t.Errorf("ValidKey(%q) = true", k)
		}
	}
}

func testStore(t *testing.T, s Store) {
	ctx := context.Background()
	if _, err := s.Get(ctx, "absent"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get(absent): %v, want ErrNotFound", err)
	}
	if err := s.Put(ctx, "k-1", []byte("one")); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "k-1", []byte("two")); err != nil {
		t.Fatal(err)
	}
	if b, err := s.Get(ctx, "k-1"); err != nil || string(b) != "two" {
		t.Fatalf("Get = %q, %v; want the overwritten value", b, err)
	}
	if err := s.Delete(ctx, "k-1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "k-1"); err != nil {
		t.Fatalf("deleting an absent key: %v", err)
	}
	if _, err := s.Get(ctx, "k-1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get after Delete: %v", err)
	}
	for _, k := range []string{"../escape", "a/b", ".hidden", "", "/etc/passwd", strings.Repeat("x", 129)} {
		if err := s.Put(ctx, k, []byte("x")); !errors.Is(err, ErrInvalidKey) {
			t.Fatalf("Put(%q): %v, want ErrInvalidKey", k, err)
		}
		if _, err := s.Get(ctx, k); !errors.Is(err, ErrInvalidKey) {
			t.Fatalf("Get(%q): %v, want ErrInvalidKey", k, err)
		}
		if err := s.Delete(ctx, k); !errors.Is(err, ErrInvalidKey) {
			t.Fatalf("Delete(%q): %v, want ErrInvalidKey", k, err)
		}
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.Put(cancelled, "k-2", []byte("x")); !errors.Is(err, context.Canceled) {
		t.Fatalf("Put with a cancelled context: %v", err)
	}
	// The store hands out copies.
	data := []byte("abc")
	if err := s.Put(ctx, "k-3", data); err != nil {
		t.Fatal(err)
	}
	data[0] = 'X'
	b, _ := s.Get(ctx, "k-3")
	b[1] = 'Y'
	if b2, _ := s.Get(ctx, "k-3"); string(b2) != "abc" {
		t.Fatalf("the store shares storage with its callers: %q", b2)
	}
}

func TestMemoryStore(t *testing.T) { testStore(t, NewMemoryStore()) }

func TestZeroMemoryStore(t *testing.T) { testStore(t, &MemoryStore{}) }

func TestDirStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "payloads")
	s, err := NewDirStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	testStore(t, s)
	// Nothing escaped the directory and no temporary file was left behind.
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "escape")); !os.IsNotExist(err) {
		t.Fatalf("a key escaped the directory: %v", err)
	}
	if err := s.Put(context.Background(), "k-4", []byte("four")); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, ",") != "k-3,k-4" {
		t.Fatalf("directory holds %v, want [k-3 k-4]", names)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "k-4")); string(b) != "four" {
		t.Fatalf("file holds %q", b)
	}
	if _, err := NewDirStore(""); err == nil {
		t.Fatal("an empty directory was accepted")
	}
}

func TestDirStoreWithCodec(t *testing.T) {
	s, err := NewDirStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c := Must(acemq.Bytes, s)
	big := payload(DefaultThreshold + 1)
	body, err := c.Encode(big)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := KeyOf(body)
	if fi, err := os.Stat(filepath.Join(s.Dir(), key)); err != nil || fi.Size() != int64(len(big)) {
		t.Fatalf("stat %s: %v", key, err)
	}
	var out []byte
	if err := c.Decode(body, "", &out); err != nil || !bytes.Equal(out, big) {
		t.Fatalf("decode: %v", err)
	}
}

func FuzzDecode(f *testing.F) {
	store := NewMemoryStore()
	_ = store.Put(context.Background(), "k1", []byte("stored payload"))
	f.Add([]byte{})
	f.Add([]byte{0xAC})
	f.Add([]byte{0xAC, 0x01})
	f.Add([]byte{0xAC, 0x01, 0x00})
	f.Add([]byte{0xAC, 0x01, 0x00, 'h', 'i'})
	f.Add([]byte{0xAC, 0x01, 0x01})
	f.Add([]byte{0xAC, 0x01, 0x01, 'k', '1'})
	f.Add([]byte{0xAC, 0x01, 0x01, '.', '.', '/', 'x'})
	f.Add([]byte{0xAC, 0x01, 0x02, 'x'})
	f.Add([]byte(`{"id":"o-1"}`))
	c := Must(acemq.Bytes, store, WithTimeout(time.Second))
	j := Must(acemq.JSON, store, WithTimeout(time.Second))
	f.Fuzz(func(t *testing.T, body []byte) {
		var out []byte
		err := c.Decode(body, "application/octet-stream", &out)
		switch {
		case bytes.HasPrefix(body, []byte{0xAC, 0x01, 0x00}):
			if err != nil || !bytes.Equal(out, body[3:]) {
				t.Fatalf("inline % x: %v, % x", body, err, out)
			}
		case bytes.HasPrefix(body, []byte{0xAC, 0x01, 0x01}):
			key, ok := KeyOf(body)
			if ok && key == "k1" {
				if err != nil || string(out) != "stored payload" {
					t.Fatalf("stored k1: %v", err)
				}
				break
			}
			var de *acemq.DecodeError
			if !errors.As(err, &de) || de.Retryable {
				t.Fatalf("stored % x: err %v, want a fatal DecodeError", body, err)
			}
		default:
			if err != nil || !bytes.Equal(out, body) {
				t.Fatalf("unframed % x: %v", body, err)
			}
		}
		// The claim check adds nothing to what the wrapped codec's decoding
		// costs (64 bytes per byte for JSON, its bound in package acemq's
		// FuzzJSONDecode).
		var v any
		allocbound.Check(t, len(body), 64, 16<<10, func() { _ = j.Decode(body, "application/json", &v) })
	})
}

// The wrapped codec's bounds apply to a stored payload as to an inline
// one: a payload over them is a non-retryable DecodeError that errors.Is
// finds as acemq.ErrTooLarge.
func TestWrappedCodecBoundsApplyToStoredPayloads(t *testing.T) {
	store := NewMemoryStore()
	c := Must(codec.JSON(codec.WithMaxBodySize(1000)), store, WithThreshold(100))
	body, err := c.Encode(strings.Repeat("x", 2000))
	if err != nil || !bytes.HasPrefix(body, storedPrefix) {
		t.Fatalf("% x, %v", body[:3], err)
	}
	var s string
	err = c.Decode(body, "application/json", &s)
	var de *acemq.DecodeError
	if !errors.As(err, &de) || de.Retryable || !errors.Is(err, acemq.ErrTooLarge) ||
		!strings.Contains(err.Error(), "body of 2002 bytes exceeds the json codec's limit of 1000") {
		t.Fatalf("%v", err)
	}
}
