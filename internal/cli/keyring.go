package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/codec/encrypted"
	"github.com/acemq/acemq/internal/media"
	"github.com/spf13/cobra"
)

// keyringHelp is the --keyring flag's usage.
const keyringHelp = `JSON keyring file {"current": ID, "keys": {ID: BASE64, …}} to open encrypted bodies with (` + encrypted.ContentType + `)`

// AddKeyringFlag gives a command --keyring FILE.
func AddKeyringFlag(cmd *cobra.Command, path *string) {
	cmd.Flags().StringVar(path, "keyring", "", keyringHelp)
}

// LoadKeyring loads --keyring, or returns nil when it was not given. The
// error never quotes the file.
func LoadKeyring(path string) (*encrypted.Codec, error) {
	if path == "" {
		return nil, nil
	}
	ring, err := encrypted.LoadKeyringFile(path)
	if err != nil {
		return nil, WithCode(ExitFailure, fmt.Errorf("--keyring: %w", err))
	}
	return encrypted.Must(acemq.Bytes, ring), nil
}

// IsEncrypted reports whether a message says its body is encrypted. The
// content type decides (docs/wire.md §4.3, §4.4: dispatch on it first).
func IsEncrypted(contentType string) bool { return media.Type(contentType) == encrypted.ContentType }

// Opened is what the CLI learnt of a message's encrypted body.
type Opened struct {
	Encrypted bool   // the content type says so
	KeyID     string // the key id in the frame ("" when not a frame)
	Decrypted bool   // a keyring opened it: plain is the plaintext
	Plain     []byte // the plaintext (empty for an empty plaintext)
	Err       error  // why the keyring could not open it
}

// OpenBody opens m's body with codec when m is encrypted. codec may be nil
// (no --keyring): the key id is still read.
func OpenBody(codec *encrypted.Codec, m acemq.Message[[]byte]) Opened {
	if !IsEncrypted(m.ContentType) {
		return Opened{}
	}
	o := Opened{Encrypted: true}
	o.KeyID, _ = encrypted.KeyIDOf(m.Body)
	if codec == nil {
		return o
	}
	o.Plain, o.Err = codec.Open(m.Body)
	// An empty plaintext opens to an empty (possibly nil) slice: whether
	// it was decrypted is the error's absence, never the slice's.
	o.Decrypted = o.Err == nil
	return o
}

// Failed reports whether a keyring was given and could not open the body.
func (o Opened) Failed() bool { return o.Err != nil }

// ReportUnopened tells standard error that message n (id) could not be
// opened and was left where it was.
func ReportUnopened(w io.Writer, n int, m acemq.Message[[]byte], o Opened, where string) {
	id := o.KeyID
	if id == "" {
		id = "(none: not an encrypted frame)"
	}
	var oe *encrypted.OpenError
	why := o.Err.Error()
	if errors.As(o.Err, &oe) {
		if oe.OnRing {
			why = "the keyring's key of that id does not open it (a wrong key or a tampered body)"
		} else {
			why = "that key is not on the keyring"
		}
	}
	fmt.Fprintf(w, "acemq: message %d (id %s) is encrypted under key id %s: %s; %s\n", n, m.Envelope.ID(), id, why, where)
}

// EncodeWith turns the body given on the command line into a codec's
// bytes: text and bytes take it as it is; every other codec takes it as
// JSON and encodes the value it holds.
func EncodeWith(c acemq.Codec, name string, body []byte) ([]byte, error) {
	mt, _, _ := mime.ParseMediaType(c.ContentType())
	switch {
	case c == acemq.Bytes:
		return body, nil
	case c == acemq.Text || mt == "text/plain":
		return c.Encode(string(body))
	}
	var v any
	if err := unmarshalNumbers(body, &v); err != nil {
		return nil, fmt.Errorf("--codec %s encodes a value given as JSON, and the body is not JSON: %w", name, err)
	}
	return c.Encode(v)
}

// unmarshalNumbers reads JSON into v with whole numbers as int64 and the
// others as float64, so that formats with integers (YAML, TOML, Avro) get
// integers.
func unmarshalNumbers(data []byte, v *any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one JSON value")
	}
	*v = numbers(*v)
	return nil
}

func numbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = numbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = numbers(e)
		}
	}
	return v
}
