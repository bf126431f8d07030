package console

import (
	"crypto/rand"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html"
	"io/fs"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/hostguard"
	"github.com/acemq/acemq/internal/management"
)

// Defaults of New.
const (
	DefaultPeekLimit  = 1000
	DefaultPeekBudget = 8 << 20
	DefaultInterval   = 2 * time.Second
)

// minPeekBudget is the least peek budget: room for a few summaries.
const minPeekBudget = 64 << 10

// The names under which a request carries the token and the cross-site
// guard.
const (
	tokenCookie = "acemq_console_token"
	tokenQuery  = "token"
	csrfHeader  = "X-Acemq-Console"
)

//go:embed web
var webFS embed.FS

// Console is the operator console: an http.Handler serving the web page
// and the JSON API behind it. Make one with New; Close it before closing
// its connection.
type Console struct {
	conn *acemq.Conn
	cfg  config
	csrf string
	mgmt *management.Client
	page []byte
	www  http.Handler
	// guard admits requests: to a loopback name without a token, carrying
	// the token with one.
	guard hostguard.Guard

	// mu serialises every read of a queue (peek, replay, delete, export):
	// a message one holds is invisible to another, so two at once would
	// each see part of the queue.
	mu sync.Mutex

	done      chan struct{}
	closeOnce sync.Once
}

// New returns a console for conn's broker. It fails on options that make
// no sense (a negative peek limit, an unparseable management URL).
func New(conn *acemq.Conn, opts ...Option) (*Console, error) {
	if conn == nil {
		return nil, errors.New("console: New needs a connection")
	}
	cfg := config{peekLimit: DefaultPeekLimit, peekBudget: DefaultPeekBudget, interval: DefaultInterval}
	for _, o := range opts {
		o.apply(&cfg)
	}
	if cfg.peekLimit <= 0 {
		return nil, fmt.Errorf("console: WithPeekLimit(%d): the limit must be 1 or more", cfg.peekLimit)
	}
	if cfg.peekBudget < minPeekBudget {
		return nil, fmt.Errorf("console: WithPeekBudget(%d): the budget must be at least %d bytes", cfg.peekBudget, minPeekBudget)
	}
	if cfg.interval <= 0 {
		return nil, fmt.Errorf("console: WithInterval(%s): the interval must be positive", cfg.interval)
	}
	for _, t := range cfg.topology {
		if err := t.Validate(); err != nil {
			return nil, fmt.Errorf("console: WithTopology: %w", err)
		}
	}
	c := &Console{conn: conn, cfg: cfg, done: make(chan struct{})}
	c.guard = hostguard.Guard{
		Name:       "this console",
		Token:      cfg.token,
		Cookie:     tokenCookie,
		Query:      tokenQuery,
		APIPrefix:  "/api/",
		NeedsToken: "open the address it printed (…?token=…), or send Authorization: Bearer TOKEN",
	}
	if cfg.mgmtURL != "" {
		m, err := management.New(cfg.mgmtURL, cfg.mgmtVhost)
		if err != nil {
			return nil, fmt.Errorf("console: WithManagement: %w", err)
		}
		c.mgmt = m
	}
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("console: making the cross-site guard: %w", err)
	}
	c.csrf = hex.EncodeToString(b[:])
	page, err := webFS.ReadFile("web/index.html")
	if err != nil {
		return nil, err
	}
	c.page = []byte(strings.Replace(string(page), "{{csrf}}", html.EscapeString(c.csrf), 1))
	sub, err := fs.Sub(webFS, "web")
	if err != nil {
		return nil, err
	}
	c.www = http.FileServerFS(sub)
	return c, nil
}

// Close ends the live-update streams the console is serving (an
// http.Server's Shutdown waits for them otherwise). It does not close the
// connection.
func (c *Console) Close() error {
	c.closeOnce.Do(func() { close(c.done) })
	return nil
}

// ServeHTTP serves the page at /, /queues/NAME and /queues/NAME/messages/ID
// (one page; each view has its URL), its assets under /assets/, and the
// JSON API under /api/ (docs/console.md lists it).
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
	if !c.guard.Admit(w, r) {
		return
	}
	p := r.URL.Path
	switch {
	case strings.HasPrefix(p, "/api/"):
		c.serveAPI(w, r)
	case strings.HasPrefix(p, "/assets/"):
		if strings.HasSuffix(p, "/") {
			http.NotFound(w, r) // no listing
			return
		}
		r2 := r.Clone(r.Context())
		r2.URL.Path = strings.TrimPrefix(p, "/assets")
		w.Header().Set("Cache-Control", "no-cache")
		c.www.ServeHTTP(w, r2)
	case p == "/" || strings.HasPrefix(p, "/queues/"):
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(c.page)
	default:
		http.NotFound(w, r)
	}
}

// IsLoopback reports whether addr (host:port, as given to net.Listen)
// listens on the loopback interface only. A listener anywhere else should
// be given a token (WithToken).
func IsLoopback(addr string) bool { return hostguard.LoopbackAddr(addr) }
