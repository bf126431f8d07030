// Package encrypted wraps any acemq.Codec in AES-GCM, framed as the AceMQ
// family frames encrypted bodies (docs/wire.md §4.2), so that only a
// holder of the key reads a body, in Go or in any sibling library.
//
//	ring, err := encrypted.LoadKeyringFile("/etc/acemq/keyring.json")
//	codec, err := encrypted.New(acemq.JSON, ring)
//	pub := acemq.NewPublisher[Order](conn, "orders", acemq.WithCodec(codec))
//
// The body on the wire:
//
//	0xAE 0x01 <L> <key id, L bytes> <nonce, 12 bytes> <ciphertext ‖ 16-byte tag>
//
// The associated data is the header (magic through key id), so the key id
// is bound to the ciphertext; nothing else of the message is. Headers and
// properties are neither encrypted nor authenticated.
//
// A Keyring encrypts with its current key (32 bytes: AES-256) and decrypts
// with every key it holds (16, 24 or 32 bytes), which is how keys rotate
// without downtime. Keys come from a JSON file (LoadKeyringFile), an
// environment variable (KeyringFromEnv), the application's own bytes
// (NewKeyring) or a provider function, for a KMS (KeyringFromProvider).
// Keys and keyrings never print their secrets: String, Format, GoString,
// MarshalJSON and slog's LogValue show key ids only.
//
// A body that does not open — a wrong key, a tampered body or a key id the
// ring does not hold — is a non-retryable *acemq.DecodeError wrapping an
// *OpenError that names the key id and says whether it is on the ring; a
// consumer parks the message. KeyIDOf reads the key id of a body without
// any key, for dead-letter triage.
//
// The package is named encrypted, not crypto, so that it does not shadow the
// standard library's crypto at call sites: encrypted.New(acemq.JSON, ring)
// reads as what it makes. docs/encryption.md in the repository has more.
package encrypted
