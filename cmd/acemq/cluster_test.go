package main

import (
	"net"
	"testing"
)

// deadURL is an amqp:// URL where nothing listens.
func deadURL(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return "amqp://guest:guest@" + addr + "/"
}

// TestURLListOnEveryCommand: --url takes a comma-separated list; a node of
// it that is down costs nothing but a refused dial. publish and consume
// reach the broker through a list whose other node is dead (acemq-bench:
// TestURLList).
func TestURLListOnEveryCommand(t *testing.T) {
	conn, url := brokerConn(t)
	q := testQueue(t, conn, "urllist")
	list := deadURL(t) + "," + url
	runCLI(t, "", "publish", "--url", list, "--exchange", "", "--routing-key", q, "hello").wantCode(t, 0)
	lines := jsonLines(t, runCLI(t, "", "consume", "--url", list, "--queue", q, "--count", "1", "--json").wantCode(t, 0).stdout)
	if len(lines) != 1 {
		t.Fatalf("consume through a list printed %d lines", len(lines))
	}
}
