package testenv

import (
	"io"
	"net"
	"sync"
	"testing"
)

// FreeAddr returns a loopback address where nothing listens: a port the
// system has just handed out and the test released. Dialling it is
// refused until something listens there (Forwarder.Start).
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// Forwarder listens on an address and forwards every connection to a
// backend, from Start until Close: a broker that comes up late. The zero
// value is ready to use.
type Forwarder struct {
	mu   sync.Mutex
	ln   net.Listener
	open []net.Conn
	wg   sync.WaitGroup
}

// Start listens on addr and forwards what it accepts to backend. A
// failure to listen fails the test (without stopping it: Start may run on
// another goroutine).
func (f *Forwarder) Start(t testing.TB, addr, backend string) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Errorf("listening on %s: %v", addr, err)
		return
	}
	f.mu.Lock()
	f.ln = ln
	f.mu.Unlock()
	f.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b, err := net.Dial("tcp", backend)
			if err != nil {
				_ = c.Close()
				continue
			}
			f.mu.Lock()
			f.open = append(f.open, c, b)
			f.mu.Unlock()
			f.wg.Go(func() { _, _ = io.Copy(b, c); _ = b.Close() })
			f.wg.Go(func() { _, _ = io.Copy(c, b); _ = c.Close() })
		}
	})
}

// Close stops listening, closes the forwarded connections and waits for
// the forwarder's goroutines.
func (f *Forwarder) Close() {
	f.mu.Lock()
	if f.ln != nil {
		_ = f.ln.Close()
	}
	for _, c := range f.open {
		_ = c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}
