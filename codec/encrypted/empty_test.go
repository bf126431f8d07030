package encrypted

import (
	"encoding/base64"
	"testing"

	"github.com/acemq/acemq"
)

// A body the Java, Python or Ruby library encrypted from an empty
// plaintext opens to an empty body: through Open, and through Decode into
// []byte and string.
func TestInteropEmptyPlaintext(t *testing.T) {
	f := loadInterop(t)
	keys := map[string][]byte{}
	for _, k := range f.Keys {
		b, err := base64.StdEncoding.DecodeString(k.Base64)
		if err != nil {
			t.Fatal(err)
		}
		keys[k.ID] = b
	}
	r, err := NewKeyring(f.Keys["first"].ID, keys)
	if err != nil {
		t.Fatal(err)
	}
	libs := map[string]bool{}
	for _, s := range f.Samples {
		if s.Plaintext != "" {
			continue
		}
		libs[s.Library] = true
		body, err := base64.StdEncoding.DecodeString(s.Body)
		if err != nil {
			t.Fatal(err)
		}
		plain, err := Must(acemq.Bytes, r).Open(body)
		if err != nil || len(plain) != 0 {
			t.Errorf("%s: Open = %q, %v; want an empty body", s.Library, plain, err)
		}
		var b []byte
		if err := Must(acemq.Bytes, r).Decode(body, ContentType, &b); err != nil || len(b) != 0 {
			t.Errorf("%s: Decode into []byte = %q, %v; want an empty body", s.Library, b, err)
		}
		str := "not empty"
		if err := Must(acemq.Text, r).Decode(body, ContentType, &str); err != nil || str != "" {
			t.Errorf("%s: Decode into string = %q, %v; want \"\"", s.Library, str, err)
		}
	}
	if len(libs) != 3 {
		t.Errorf("empty-plaintext samples from %v, want java, python and ruby", libs)
	}
}
