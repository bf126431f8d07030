package encrypted

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/media"
)

// Codec is the encrypting codec: it encodes with the codec it wraps and
// seals the result under the keyring's current key; it opens a body with
// whichever key its key id names and decodes the plaintext with the wrapped
// codec. It implements acemq.Codec and is safe for concurrent use. Build
// one with New.
type Codec struct {
	inner acemq.Codec
	ring  *Keyring
	rand  io.Reader // nonces; crypto/rand except in this package's tests
}

// New returns a codec that encrypts what inner encodes with ring's current
// key and decrypts with any key on ring.
func New(inner acemq.Codec, ring *Keyring) (*Codec, error) {
	if inner == nil {
		return nil, errors.New("encrypted: New needs the codec to wrap, for example acemq.JSON")
	}
	if ring == nil {
		return nil, errors.New("encrypted: New needs a Keyring, for example from encrypted.LoadKeyringFile")
	}
	return &Codec{inner: inner, ring: ring, rand: rand.Reader}, nil
}

// Must is New for arguments known to be valid; it panics on an error.
func Must(inner acemq.Codec, ring *Keyring) *Codec {
	c, err := New(inner, ring)
	if err != nil {
		panic(err)
	}
	return c
}

// Keyring is the codec's keyring.
func (c *Codec) Keyring() *Keyring { return c.ring }

// Inner is the wrapped codec.
func (c *Codec) Inner() acemq.Codec { return c.inner }

// ContentType is application/vnd.acemq.encrypted, whatever the wrapped
// codec writes: a reader learns the plaintext's format from its own codec.
func (c *Codec) ContentType() string { return ContentType }

// Accepts reports whether contentType is application/vnd.acemq.encrypted
// (case-insensitively, ignoring parameters).
func (c *Codec) Accepts(contentType string) bool { return media.Type(contentType) == ContentType }

// Encode encodes v with the wrapped codec and seals it under the current
// key with a fresh random 12-byte nonce.
func (c *Codec) Encode(v any) ([]byte, error) {
	plain, err := c.inner.Encode(v)
	if err != nil {
		return nil, err
	}
	return c.seal(plain)
}

// Seal frames an already encoded body under the current key.
func (c *Codec) seal(plain []byte) ([]byte, error) {
	id := c.ring.current
	aead, _, _, err := c.ring.aead(id)
	if err != nil || aead == nil {
		return nil, fmt.Errorf("encrypted: the current key %q is not available: %v", id, err)
	}
	var nonce [NonceSize]byte
	if _, err := io.ReadFull(c.rand, nonce[:]); err != nil {
		return nil, fmt.Errorf("encrypted: no randomness for a nonce: %w", err)
	}
	return seal(aead, id, nonce[:], plain), nil
}

// Seal encrypts an already encoded body under the current key (what Encode
// does after the wrapped codec): for tools that forward bytes, such as the
// acemq CLI's publish --encrypt.
func (c *Codec) Seal(plaintext []byte) ([]byte, error) { return c.seal(plaintext) }

// Open decrypts body and returns the plaintext, the wrapped codec's bytes.
// Its errors are those of Decode.
func (c *Codec) Open(body []byte) ([]byte, error) {
	f, err := parse(body)
	if err != nil {
		return nil, &acemq.DecodeError{ContentType: ContentType, Err: err}
	}
	aead, onRing, retryable, err := c.ring.aead(f.keyID)
	if err != nil {
		return nil, &acemq.DecodeError{ContentType: ContentType, Retryable: retryable, Err: err}
	}
	if aead == nil {
		return nil, &acemq.DecodeError{ContentType: ContentType, Err: &OpenError{KeyID: f.keyID, OnRing: onRing, held: c.ring.IDs()}}
	}
	plain, err := aead.Open(nil, f.nonce, f.sealed, f.aad)
	if err != nil {
		return nil, &acemq.DecodeError{ContentType: ContentType, Err: &OpenError{KeyID: f.keyID, OnRing: true}}
	}
	return plain, nil
}

// Decode opens body and decodes the plaintext into v with the wrapped
// codec, passing it the wrapped codec's own content type. A body that is
// not a frame, names a key the ring does not hold, or does not
// authenticate (a wrong key, a tampered body) is a non-retryable
// *acemq.DecodeError; a Provider that fails makes it retryable.
func (c *Codec) Decode(body []byte, contentType string, v any) error {
	plain, err := c.Open(body)
	if err != nil {
		return err
	}
	return c.inner.Decode(plain, c.inner.ContentType(), v)
}

// OpenError reports an encrypted body the keyring could not open. A wrong
// key and a tampered body are the same error, on purpose: AES-GCM cannot
// tell them apart, and saying which would help an attacker.
type OpenError struct {
	// KeyID is the key id the body was written under.
	KeyID string
	// OnRing is true when the ring holds a key with that id (so the key
	// differs from the writer's, or the body was changed), false when it
	// does not.
	OnRing bool
	held   []string
}

// Error names the key id and whether the ring holds it.
func (e *OpenError) Error() string {
	if e.OnRing {
		return fmt.Sprintf("the body encrypted under key id %q does not open with the keyring's key of that id: a wrong key or a tampered body", e.KeyID)
	}
	return fmt.Sprintf("the body is encrypted under key id %q, which is not on the keyring (it holds %v): add that key to read it", e.KeyID, e.held)
}

// String names the wrapped codec's content type and the keyring's key ids;
// never a secret.
func (c *Codec) String() string {
	return fmt.Sprintf("encrypted.Codec{inner: %s, keyring: %v}", c.inner.ContentType(), c.ring)
}

// GoString is String.
func (c *Codec) GoString() string { return c.String() }

// Format prints String for every verb.
func (c *Codec) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, c.String()) }

// LogValue logs what String shows.
func (c *Codec) LogValue() slog.Value {
	return slog.GroupValue(slog.String("inner", c.inner.ContentType()), slog.Any("keyring", c.ring))
}
