package encrypted

import (
	"crypto/cipher"
	"errors"
	"fmt"
	"unicode/utf8"
)

// ContentType is the content type of every body the codec writes
// (docs/wire.md §4.2, §4.4).
const ContentType = "application/vnd.acemq.encrypted"

// Frame bytes (docs/wire.md §4.2).
const (
	Magic   byte = 0xAE
	Version byte = 0x01
)

// Sizes of the frame's fixed parts, in bytes.
const (
	NonceSize = 12
	TagSize   = 16
	// MaxKeyIDLen is the longest key id the one-byte length can carry.
	MaxKeyIDLen = 255
)

// errNotFramed is the cause of a decode failure on a body that is not an
// encrypted frame at all.
var errNotFramed = errors.New("the body is not an AceMQ encrypted frame")

// checkKeyID reports whether id can be a key id: 1 to 255 bytes of UTF-8.
func checkKeyID(id string) error {
	switch {
	case id == "":
		return errors.New("a key id must not be empty")
	case len(id) > MaxKeyIDLen:
		return fmt.Errorf("a key id is at most %d bytes, not %d", MaxKeyIDLen, len(id))
	case !utf8.ValidString(id):
		return errors.New("a key id must be UTF-8")
	}
	return nil
}

// header appends the frame header (the associated data) for id to dst.
func header(dst []byte, id string) []byte {
	dst = append(dst, Magic, Version, byte(len(id)))
	return append(dst, id...)
}

// seal frames plaintext under aead and id with nonce (NonceSize bytes).
func seal(aead cipher.AEAD, id string, nonce, plaintext []byte) []byte {
	hl := 3 + len(id)
	out := make([]byte, hl, hl+NonceSize+len(plaintext)+TagSize)
	header(out[:0], id)
	out = append(out, nonce...)
	return aead.Seal(out, nonce, plaintext, out[:hl])
}

// frame is a parsed encrypted body. Its slices point into the body.
type frame struct {
	keyID      string
	aad, nonce []byte
	sealed     []byte // ciphertext ‖ tag
}

// parse splits body into its frame, refusing anything that is not one:
// a wrong magic or version, a zero key-id length, a length that runs past
// the body, a key id that is not UTF-8, or too few bytes for a nonce and a
// tag. It never allocates on the strength of a length in the body.
func parse(body []byte) (frame, error) {
	if len(body) < 3 || body[0] != Magic {
		return frame{}, errNotFramed
	}
	if body[1] != Version {
		return frame{}, fmt.Errorf("the encrypted frame has version %d; this library reads version %d", body[1], Version)
	}
	l := int(body[2])
	if l == 0 {
		return frame{}, errors.New("the encrypted frame has an empty key id")
	}
	hl := 3 + l
	if len(body) < hl+NonceSize+TagSize {
		return frame{}, fmt.Errorf("the encrypted frame is %d bytes, shorter than its %d-byte header, nonce and tag", len(body), hl+NonceSize+TagSize)
	}
	id := body[3:hl]
	if !utf8.Valid(id) {
		return frame{}, errors.New("the encrypted frame's key id is not UTF-8")
	}
	return frame{keyID: string(id), aad: body[:hl], nonce: body[hl : hl+NonceSize], sealed: body[hl+NonceSize:]}, nil
}

// KeyIDOf returns the key id an encrypted body was written under, read in
// the clear without any key, for dead-letter triage. ok is false when body
// is not an encrypted frame.
func KeyIDOf(body []byte) (keyID string, ok bool) {
	f, err := parse(body)
	if err != nil {
		return "", false
	}
	return f.keyID, true
}

// IsFramed reports whether body is an encrypted frame (version 1, a key id
// and room for a nonce and a tag). It does not say whether any key opens it.
func IsFramed(body []byte) bool {
	_, err := parse(body)
	return err == nil
}
