package claimcheck

import (
	"os"
	"strings"
	"testing"

	"github.com/acemq/acemq"
)

// A store that fails fails the encode with an error that says claimcheck:
// once, at its start.
func TestEncodeStoreFailureSaysClaimcheckOnce(t *testing.T) {
	dir := t.TempDir() + "/store"
	s, err := NewDirStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	c, err := New(acemq.Bytes, s, WithThreshold(0))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Encode([]byte("payload"))
	if err == nil {
		t.Fatal("Encode into a store whose directory is gone succeeded")
	}
	if msg := err.Error(); !strings.HasPrefix(msg, "claimcheck: ") || strings.Count(msg, "claimcheck: ") != 1 {
		t.Errorf("Encode into a store whose directory is gone = %q: want it to begin with claimcheck: and say it once", msg)
	}
}
