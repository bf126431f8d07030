package cli

import "testing"

func TestErrorLine(t *testing.T) {
	for in, want := range map[string]string{
		"acemq: connecting to x: rabbitmq: refused": "acemq: connecting to x: rabbitmq: refused",
		"rpc: no reply arrived":                     "acemq: rpc: no reply arrived",
		"--url is empty":                            "acemq: --url is empty",
	} {
		if got := errorLine(errorString(in)); got != want {
			t.Errorf("errorLine(%q) = %q, want %q", in, got, want)
		}
	}
}

type errorString string

func (e errorString) Error() string { return string(e) }
