package acemq

import (
	"strings"
	"testing"
)

func TestConnStringHidesPassword(t *testing.T) {
	c := &Conn{url: "amqp://guest:xxxxx@localhost:5672/", name: "orders"}
	if s := c.String(); strings.Contains(s, "guest:guest") || !strings.Contains(s, "orders") {
		t.Fatalf("String() = %s", s)
	}
}
