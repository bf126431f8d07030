package cli

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
	"unicode/utf8"

	"github.com/acemq/acemq"
)

// HeadersJSON is env's application headers in their JSON form, as the
// library writes them in the envelope's ("headers"), one value per name.
func HeadersJSON(env acemq.Envelope) (map[string]json.RawMessage, error) {
	b, err := env.MarshalJSON()
	if err != nil {
		return nil, err
	}
	var form struct {
		Headers map[string]json.RawMessage `json:"headers"`
	}
	if err := json.Unmarshal(b, &form); err != nil {
		return nil, fmt.Errorf("reading the envelope's JSON form: %w", err)
	}
	return form.Headers, nil
}

// MarshalLine marshals v compactly, without HTML escaping, with a newline.
func MarshalLine(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("rendering JSON: %w", err)
	}
	return buf.Bytes(), nil
}

// BodyJSON sets body (UTF-8 text) or bodyBase64.
func BodyJSON(b []byte) (text, b64 *string) {
	if utf8.Valid(b) {
		s := string(b)
		return &s, nil
	}
	s := base64.StdEncoding.EncodeToString(b)
	return nil, &s
}

// SortedKeys returns the keys of m, sorted.
func SortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
