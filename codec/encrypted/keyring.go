package encrypted

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// ErrUnknownKey is what a Provider returns for a key id it holds no key
// for. The decode that asked fails for good (the message is parked). Like
// the driver's sentinels it is a fragment, met wrapped after "encrypted: ".
var ErrUnknownKey = errors.New("no key with that id")

// Provider fetches the secret of key id from where the application keeps
// keys, a KMS for instance. It returns ErrUnknownKey (possibly wrapped)
// when there is no such key; any other error is taken as the provider
// being unavailable, and a decode that needed it is retryable. It must be
// safe for concurrent use.
type Provider func(ctx context.Context, id string) ([]byte, error)

// DefaultProviderTimeout bounds each Provider call a Keyring makes while
// decoding: Codec.Decode takes no context.
const DefaultProviderTimeout = 10 * time.Second

// maxKeyringFile bounds the size of a keyring file or variable: a keyring is
// a few hundred bytes, and a mistaken path must not be read whole.
const maxKeyringFile = 1 << 20

// Keyring holds the keys a codec encrypts and decrypts with: one current
// key, used for every body it writes, and any number of others it reads.
// It is safe for concurrent use and never prints a secret: String, Format,
// GoString, MarshalJSON and LogValue show the key ids only.
type Keyring struct {
	current string
	mu      sync.RWMutex
	keys    map[string]cipher.AEAD
	sizes   map[string]int

	provider Provider
	timeout  time.Duration
}

// NewKeyring returns a keyring that encrypts with the key named current and
// decrypts with every key in keys (current included), given as id → secret.
// The current key must be 32 bytes (AES-256); the others 16, 24 or 32
// bytes. Key ids are 1 to 255 bytes of UTF-8. The secrets are copied.
func NewKeyring(current string, keys map[string][]byte) (*Keyring, error) {
	r := &Keyring{current: current, keys: make(map[string]cipher.AEAD, len(keys)), sizes: make(map[string]int, len(keys))}
	for _, id := range slices.Sorted(mapKeys(keys)) {
		if err := r.add(id, keys[id]); err != nil {
			return nil, err
		}
	}
	if err := r.checkCurrent(); err != nil {
		return nil, err
	}
	return r, nil
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func (r *Keyring) checkCurrent() error {
	if err := checkKeyID(r.current); err != nil {
		return fmt.Errorf("encrypted: the current key id: %w", err)
	}
	size, ok := r.sizes[r.current]
	if !ok {
		return fmt.Errorf("encrypted: the current key %q is not among the keys (%s)", r.current, strings.Join(r.IDs(), ", "))
	}
	if size != 32 {
		return fmt.Errorf("encrypted: the current key %q is %d bytes; bodies are written with 32-byte (AES-256) keys, and 16- and 24-byte keys can only be read", r.current, size)
	}
	return nil
}

// add puts a key on the ring; the caller holds the lock or owns r.
func (r *Keyring) add(id string, secret []byte) error {
	if err := checkKeyID(id); err != nil {
		return fmt.Errorf("encrypted: key %q: %w", id, err)
	}
	aead, err := newAEAD(secret)
	if err != nil {
		return fmt.Errorf("encrypted: key %q: %w", id, err)
	}
	r.keys[id] = aead
	r.sizes[id] = len(secret)
	return nil
}

func newAEAD(secret []byte) (cipher.AEAD, error) {
	switch len(secret) {
	case 16, 24, 32:
	default:
		return nil, fmt.Errorf("an AES key is 16, 24 or 32 bytes, not %d", len(secret))
	}
	block, err := aes.NewCipher(secret) // copies the key schedule, not secret
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// keyringFile is the keyring document of files and variables.
type keyringFile struct {
	Current string            `json:"current"`
	Keys    map[string]string `json:"keys"`
}

// ParseKeyring reads a keyring document:
//
//	{"current": "2026-01", "keys": {"2026-01": "<base64 key>", "orders-2025-06-rotated-out": "<base64 key>"}}
//
// Keys are standard base64 (padded or not). Unknown fields are refused, as
// are a missing current key and every key NewKeyring refuses. Error
// messages name key ids and never quote the document.
func ParseKeyring(doc []byte) (*Keyring, error) {
	var f keyringFile
	dec := json.NewDecoder(bytes.NewReader(doc)) // no string copy of the secrets
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("encrypted: the keyring is not a JSON document {\"current\": ID, \"keys\": {ID: BASE64, …}}: %s", describeJSONError(err))
	}
	if dec.More() {
		return nil, errors.New("encrypted: the keyring has more than one JSON value")
	}
	if f.Current == "" {
		return nil, errors.New(`encrypted: the keyring names no "current" key`)
	}
	if len(f.Keys) == 0 {
		return nil, errors.New(`encrypted: the keyring has no "keys"`)
	}
	secrets := make(map[string][]byte, len(f.Keys))
	for id, b64 := range f.Keys {
		secret, err := decodeBase64(b64)
		if err != nil {
			return nil, fmt.Errorf("encrypted: key %q is not base64", id)
		}
		secrets[id] = secret
	}
	r, err := NewKeyring(f.Current, secrets)
	for _, s := range secrets {
		clear(s)
	}
	return r, err
}

// describeJSONError says what is wrong with a keyring document without
// quoting it: a syntax error's message can carry a character of a key.
func describeJSONError(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("invalid JSON at byte %d", se.Offset)
	case errors.As(err, &te):
		return fmt.Sprintf("%q has the wrong type (%s)", te.Field, te.Value)
	case errors.Is(err, io.EOF):
		return "it is empty"
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return strings.TrimPrefix(err.Error(), "json: ")
	}
	return "invalid JSON"
}

func decodeBase64(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if b, err := base64.StdEncoding.DecodeString(s); err == nil {
		return b, nil
	}
	return base64.RawStdEncoding.DecodeString(s)
}

// LoadKeyringFile reads the keyring document at path (the format of
// ParseKeyring). The file should be readable by the service's user only;
// the loader does not check its mode. It is the loader the acemq CLI's
// --keyring flag uses.
func LoadKeyringFile(path string) (*Keyring, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("encrypted: opening the keyring: %w", err)
	}
	defer f.Close()
	doc, err := io.ReadAll(io.LimitReader(f, maxKeyringFile+1))
	if err != nil {
		return nil, fmt.Errorf("encrypted: reading the keyring %s: %w", path, err)
	}
	defer clear(doc)
	if len(doc) > maxKeyringFile {
		return nil, fmt.Errorf("encrypted: the keyring %s is larger than %d bytes: is it the right file?", path, maxKeyringFile)
	}
	r, err := ParseKeyring(doc)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	return r, nil
}

// KeyringFromEnv reads the keyring document (the format of ParseKeyring)
// from the environment variable name.
func KeyringFromEnv(name string) (*Keyring, error) {
	doc, ok := os.LookupEnv(name)
	if !ok || strings.TrimSpace(doc) == "" {
		return nil, fmt.Errorf("encrypted: the environment variable %s, which should hold the keyring, is not set", name)
	}
	if len(doc) > maxKeyringFile {
		return nil, fmt.Errorf("encrypted: the environment variable %s is larger than %d bytes", name, maxKeyringFile)
	}
	r, err := ParseKeyring([]byte(doc))
	if err != nil {
		return nil, fmt.Errorf("%w (in $%s)", err, name)
	}
	return r, nil
}

// KeyringFromProvider returns a keyring whose keys come from p: the current
// key is fetched now (so a misconfigured provider fails at start-up, not at
// the first publish), and any other key the first time a body names it,
// then kept. A key id p answers with ErrUnknownKey is asked again at the
// next body that names it. timeout bounds each call made while decoding (0:
// DefaultProviderTimeout).
func KeyringFromProvider(ctx context.Context, current string, p Provider, timeout time.Duration) (*Keyring, error) {
	if p == nil {
		return nil, errors.New("encrypted: KeyringFromProvider needs a Provider")
	}
	if timeout <= 0 {
		timeout = DefaultProviderTimeout
	}
	if err := checkKeyID(current); err != nil {
		return nil, fmt.Errorf("encrypted: the current key id: %w", err)
	}
	secret, err := p(ctx, current)
	if err != nil {
		return nil, fmt.Errorf("encrypted: fetching the current key %q: %w", current, err)
	}
	r := &Keyring{current: current, keys: map[string]cipher.AEAD{}, sizes: map[string]int{}, provider: p, timeout: timeout}
	err = r.add(current, secret)
	clear(secret)
	if err != nil {
		return nil, err
	}
	if err := r.checkCurrent(); err != nil {
		return nil, err
	}
	return r, nil
}

// Current is the id of the key bodies are written with.
func (r *Keyring) Current() string { return r.current }

// Has reports whether the ring holds a key with id now (a provider's keys
// count once fetched).
func (r *Keyring) Has(id string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	_, ok := r.keys[id]
	return ok
}

// IDs returns the ids of the keys the ring holds, sorted.
func (r *Keyring) IDs() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Sorted(mapKeys(r.keys))
}

// aead returns the cipher of key id, asking the provider for a key the
// ring does not hold yet. retryable is true when the provider failed.
func (r *Keyring) aead(id string) (a cipher.AEAD, onRing bool, retryable bool, err error) {
	r.mu.RLock()
	a, ok := r.keys[id]
	r.mu.RUnlock()
	if ok || r.provider == nil {
		return a, ok, false, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
	defer cancel()
	secret, err := r.provider(ctx, id)
	if errors.Is(err, ErrUnknownKey) {
		return nil, false, false, nil
	}
	if err != nil {
		return nil, false, true, fmt.Errorf("the key provider could not be asked for key %q (retried through the consumer's retry policy): %w", id, err)
	}
	a, err = newAEAD(secret)
	clear(secret)
	if err != nil {
		return nil, false, false, fmt.Errorf("the key provider's key %q: %w", id, err)
	}
	r.mu.Lock()
	r.keys[id] = a
	r.sizes[id] = 0 // not known to be writable; only the current key writes
	r.mu.Unlock()
	return a, true, false, nil
}

// String shows the current key id and the ids held; never a secret.
func (r *Keyring) String() string {
	if r == nil {
		return "encrypted.Keyring(nil)"
	}
	return fmt.Sprintf("encrypted.Keyring{current: %s, keys: [%s], secrets redacted}", r.current, strings.Join(r.IDs(), " "))
}

// GoString is String, so %#v prints no secret either.
func (r *Keyring) GoString() string { return r.String() }

// Format prints String for every verb, so no fmt verb prints a secret.
func (r *Keyring) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, r.String()) }

// LogValue logs the current key id and the ids held; never a secret.
func (r *Keyring) LogValue() slog.Value {
	if r == nil {
		return slog.StringValue("encrypted.Keyring(nil)")
	}
	return slog.GroupValue(slog.String("current", r.current), slog.Any("keys", r.IDs()), slog.String("secrets", "redacted"))
}

// MarshalJSON writes the key ids only: {"current": ID, "keys": [ID, …]}.
// It cannot be read back as a keyring document, on purpose.
func (r *Keyring) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Current string   `json:"current"`
		Keys    []string `json:"keys"`
		Secrets string   `json:"secrets"`
	}{r.current, r.IDs(), "redacted"})
}
