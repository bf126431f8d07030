package acemq

import (
	"strings"
	"testing"
)

// A JSON body costs one allocation of its own (the body; the encoder and
// its buffer are pooled), as json.Marshal's does, and is the same bytes as
// a fresh encoder writes.
func TestJSONEncodeAllocatesOnlyTheBody(t *testing.T) {
	v := &struct {
		ID    string   `json:"id"`
		Items []string `json:"items"`
		Note  string   `json:"note"`
	}{"o-1", []string{"a", "<b>"}, strings.Repeat("n", 300)}
	body, err := JSON.Encode(v)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"id":"o-1","items":["a","<b>"],"note":"` + strings.Repeat("n", 300) + `"}`; string(body) != want {
		t.Fatalf("Encode wrote %s", body)
	}
	again, _ := JSON.Encode(v)
	if &again[0] == &body[0] {
		t.Fatal("two bodies share their bytes")
	}
	if raceEnabled {
		t.Skip("allocation counts are not exact under -race")
	}
	if n := testing.AllocsPerRun(200, func() { _, _ = JSON.Encode(v) }); n != 1 {
		t.Errorf("JSON.Encode allocates %v times per body, want 1", n)
	}
}
