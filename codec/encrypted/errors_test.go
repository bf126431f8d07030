package encrypted

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// A provider that holds no current key fails KeyringFromProvider with an
// error wrapping ErrUnknownKey that says encrypted: once.
func TestProviderWithoutCurrentKeySaysEncryptedOnce(t *testing.T) {
	p := func(context.Context, string) ([]byte, error) { return nil, ErrUnknownKey }
	_, err := KeyringFromProvider(context.Background(), "k1", p, 0)
	if !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("KeyringFromProvider without the current key = %v, want an error wrapping ErrUnknownKey", err)
	}
	if msg := err.Error(); !strings.HasPrefix(msg, "encrypted: ") || strings.Count(msg, "encrypted: ") != 1 {
		t.Errorf("KeyringFromProvider without the current key = %q: want it to begin with encrypted: and say it once", msg)
	}
}
