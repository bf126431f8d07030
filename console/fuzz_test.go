package console

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/acemq/acemq/internal/management"
)

// Reasons are written by whoever failed the message: any string.
func FuzzGroupKey(f *testing.F) {
	for _, s := range []string{"", "the handler rejected it: InvalidOrderError: order o-4 is not valid: quantity -5", `lookup "x" failed`, "id 3f2a9c1e-0b7d-4c55-9e61-1b2c3d4e5f60", "0xdeadbeef1", "'", "\xff\xfe"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, reason string) {
		k := GroupKey(reason)
		if k == "" {
			t.Fatalf("GroupKey(%q) is empty", reason)
		}
		if again := GroupKey(k); again != k {
			t.Fatalf("GroupKey is not stable: %q → %q → %q", reason, k, again)
		}
		if len(groupID(k)) != 12 {
			t.Fatalf("groupID(%q) = %q", k, groupID(k))
		}
	})
}

// An action's body comes from the network.
func FuzzReadSelection(f *testing.F) {
	for _, s := range []string{`{"all":true}`, `{"ids":["a","b"]}`, `{"group":"abc","confirm":true}`, `{}`, `[]`, `{"ids":[]}`, `{"all":true,"group":"x"}`, `nul`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		s, err := readSelection(strings.NewReader(body))
		if err != nil {
			return
		}
		n := 0
		for _, set := range []bool{len(s.IDs) > 0, s.Group != "", s.All} {
			if set {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("accepted %q selecting %d ways", body, n)
		}
		_ = s.match()
		_ = s.describe()
	})
}

// Paths come from the network.
func FuzzParseAPIPath(f *testing.F) {
	for _, s := range []string{"/api/queues", "/api/events", "/api/queues/orders.new.dlq", "/api/queues/a%2Fb/messages/x", "/api/queues/q/replay", "/api/queues//x", "/api/queues/%zz", "/api/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, path string) {
		r, ok := parseAPIPath(path)
		if !ok {
			return
		}
		switch r.kind {
		case "queues", "events":
		case "queue", "replay", "delete", "export":
			if r.queue == "" {
				t.Fatalf("%q: a %s without a queue", path, r.kind)
			}
		case "message":
			if r.queue == "" || r.id == "" {
				t.Fatalf("%q: a message without a queue or id", path)
			}
		default:
			t.Fatalf("%q: kind %q", path, r.kind)
		}
	})
}

// The management API's answer is read as untrusted input.
func FuzzParseManagementQueues(f *testing.F) {
	for _, s := range []string{`[]`, `[{"name":"q","messages_ready":3,"consumers":1,"message_stats":{"publish_details":{"rate":1.5}}}]`, `{}`, `[{"name":5}]`, `null`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		qs, err := management.ParseQueues([]byte(body))
		if err != nil {
			return
		}
		rows := make([]queueRow, 0, len(qs))
		names := map[string]bool{}
		for _, q := range qs {
			rows = append(rows, queueRow{Name: q.Name, Messages: q.Ready})
			names[q.Name] = true
		}
		shown := map[string]bool{}
		for _, g := range group(rows) {
			shown[g.Name] = true
			for _, r := range g.Rungs {
				shown[r.Name] = true
			}
			if g.DLQ != nil {
				shown[g.DLQ.Name] = true
			}
			if g.Parked != nil {
				shown[g.Parked.Name] = true
			}
		}
		for n := range names {
			if !shown[n] {
				t.Fatalf("the queue %q is not in the list", n)
			}
		}
	})
}

// Bodies and content types are whatever the publisher sent.
func FuzzRenderBody(f *testing.F) {
	for _, s := range [][2]string{{`{"a":1}`, "application/json"}, {"hello", "text/plain; charset=utf-8"}, {"\x00\xff", "application/octet-stream"}, {`{"a":`, "application/vnd.x+json"}, {"x", "bad/;;"}} {
		f.Add([]byte(s[0]), s[1])
	}
	f.Fuzz(func(t *testing.T, body []byte, contentType string) {
		kind, text := renderBody(body, contentType)
		switch kind {
		case "json":
			if !json.Valid([]byte(text)) {
				t.Fatalf("indented JSON %q is not JSON", text)
			}
		case "text":
			if text != string(body) {
				t.Fatalf("text %q is not the body %q", text, body)
			}
		case "binary":
			b, err := base64.StdEncoding.DecodeString(text)
			if err != nil || !bytes.Equal(b, body) {
				t.Fatalf("base64 %q is not the body", text)
			}
		default:
			t.Fatalf("kind %q", kind)
		}
	})
}

// cut keeps at most n bytes, whole characters, and marks what it cut.
func TestCut(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"abcdefghij", 10, "abcdefghij"},
		{"abcdefghijk", 10, "abcdefg…"},
		{"ééééééé", 10, "ééé…"},
	} {
		if got := cut(c.s, c.n); got != c.want || len(got) > c.n || !utf8.ValidString(got) {
			t.Errorf("cut(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
}
