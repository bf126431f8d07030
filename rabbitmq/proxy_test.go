package rabbitmq

import (
	"crypto/tls"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/acemq/acemq/internal/testenv"
)

// proxy is a TCP (optionally TLS-terminating) proxy in front of the test
// broker. Tests use it to cut connections (recovery without hurting the
// broker for anyone else), to hold back what the broker sends (confirms
// that never arrive) and to offer amqps:// with development certificates.
type proxy struct {
	t       testing.TB
	ln      net.Listener
	backend string

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	paused bool
	resume chan struct{}
	wg     sync.WaitGroup
}

// newProxy starts a proxy to the broker of ACEMQ_TEST_AMQP_URL. With a
// non-nil tlsCfg it terminates TLS.
func newProxy(t testing.TB, tlsCfg *tls.Config) *proxy {
	t.Helper()
	u, err := url.Parse(testenv.AMQPURL(t))
	if err != nil {
		t.Fatal(err)
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "5672")
	}
	var ln net.Listener
	if tlsCfg != nil {
		ln, err = tls.Listen("tcp", "127.0.0.1:0", tlsCfg)
	} else {
		ln, err = net.Listen("tcp", "127.0.0.1:0")
	}
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{t: t, ln: ln, backend: host, conns: map[net.Conn]struct{}{}, resume: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// url returns the broker URL through the proxy, with the test URL's user,
// password and vhost.
func (p *proxy) url(scheme string) string {
	u, _ := url.Parse(testenv.AMQPURL(p.t))
	u.Scheme = scheme
	u.Host = p.ln.Addr().String()
	return u.String()
}

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		b, err := net.DialTimeout("tcp", p.backend, 5*time.Second)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c] = struct{}{}
		p.conns[b] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(b, c, false)
		go p.pipe(c, b, true)
	}
}

// pipe copies from src to dst; fromBroker copies honour pause.
func (p *proxy) pipe(dst, src net.Conn, fromBroker bool) {
	defer p.wg.Done()
	defer func() {
		_ = dst.Close()
		_ = src.Close()
		p.mu.Lock()
		delete(p.conns, dst)
		delete(p.conns, src)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32*1024)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if fromBroker {
				p.mu.Lock()
				paused, resume := p.paused, p.resume
				p.mu.Unlock()
				if paused {
					<-resume
				}
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				return
			}
			return
		}
	}
}

// pause holds back everything the broker sends until unpause.
func (p *proxy) pause() {
	p.mu.Lock()
	p.paused = true
	p.mu.Unlock()
}

func (p *proxy) unpause() {
	p.mu.Lock()
	if p.paused {
		p.paused = false
		close(p.resume)
		p.resume = make(chan struct{})
	}
	p.mu.Unlock()
}

// cut closes every proxied connection, as a network failure would.
func (p *proxy) cut() {
	p.mu.Lock()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.unpause()
}

func (p *proxy) close() {
	_ = p.ln.Close()
	p.cut()
	p.wg.Wait()
}
