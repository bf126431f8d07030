package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/acemq/acemq/memory"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRun(t *testing.T) {
	url := "memory://" + t.Name()
	t.Cleanup(func() { memory.Reset(url) })
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-url", url}, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	got := out.String()
	for _, want := range []string{
		"consumer keyring: encrypted.Keyring{current: 2026-01, keys: [2025-12 2026-01], secrets redacted}\n",
		"read o-1 (key id 2025-12, 50-byte body, application/vnd.acemq.encrypted)\n",
		"read o-2 (key id 2026-01, 50-byte body, application/vnd.acemq.encrypted)\n",
		`parked, key id 2025-12: could not be decoded: `,
		`the body is encrypted under key id "2025-12", which is not on the keyring (it holds [2026-01])`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the output has no %q:\n%s", want, got)
		}
	}
}
