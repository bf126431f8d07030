// Package clitest holds what the tests of several CLI packages use: calls
// on the operator console's API as its page makes them.
package clitest

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// ConsoleGet gets path from the console's API at base, as its page does,
// and returns the answer's body.
func ConsoleGet(t *testing.T, base, path string) string {
	t.Helper()
	return call(t, base, "GET", path, "")
}

// ConsolePost posts body to path on the console's API at base, as its
// page does, and returns the answer's body.
func ConsolePost(t *testing.T, base, path, body string) string {
	t.Helper()
	return call(t, base, "POST", path, body)
}

// call calls method on the console's API at base+path, with the guard the
// console's page carries, and fails t unless the answer is 200 OK.
func call(t *testing.T, base, method, path, body string) string {
	t.Helper()
	resp, err := http.Get(base + "/")
	if err != nil {
		t.Error(err)
		return ""
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	_, rest, _ := strings.Cut(string(page), `name="acemq-console" content="`)
	guard, _, _ := strings.Cut(rest, `"`)
	req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
	req.Header.Set("X-Acemq-Console", guard)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Errorf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	return string(b)
}
