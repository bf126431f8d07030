package rabbitmq

import (
	"math/rand/v2"
	"sync"
	"time"
)

// DefaultEndpointTimeout bounds the dial of one endpoint when a connection
// has several (driver.Config.EndpointTimeout's default): a dead or
// black-holed node then costs this long before the next is tried, not the
// whole DialTimeout.
const DefaultEndpointTimeout = 5 * time.Second

// firstEndpoint picks where a new connection's first round of dials
// starts, so that many clients given the same list spread over the nodes
// instead of all landing on the first. A variable so that tests can fix it.
var firstEndpoint = func(n int) int { return rand.IntN(n) }

// endpoints is the rotation over a connection's URLs. A round of dials
// tries every endpoint once: first those whose most recent dial did not
// fail, in ring order from next, then those whose most recent dial failed
// (the nodes found dead last time), in ring order too. A successful dial
// moves next past the endpoint, so that after losing a node the
// reconnection tries the other nodes before it.
type endpoints struct {
	mu     sync.Mutex
	n      int
	next   int
	failed []bool
}

func newEndpoints(n, start int) *endpoints {
	return &endpoints{n: n, next: start % n, failed: make([]bool, n)}
}

// round returns the indexes of the next round of dials, in order.
func (e *endpoints) round() []int {
	e.mu.Lock()
	defer e.mu.Unlock()
	order := make([]int, 0, e.n)
	for pass := range 2 {
		for k := range e.n {
			i := (e.next + k) % e.n
			if e.failed[i] == (pass == 1) {
				order = append(order, i)
			}
		}
	}
	return order
}

// dialed records the outcome of a dial of endpoint i.
func (e *endpoints) dialed(i int, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.failed[i] = !ok
	if ok {
		e.next = (i + 1) % e.n
	}
}

// endpointTimeout is the bound on one endpoint's dial: DialTimeout with a
// single URL (there is nowhere else to go), the shorter of it and
// EndpointTimeout with several.
func (c *conn) endpointTimeout() time.Duration {
	if len(c.cfg.URLs) > 1 && c.cfg.EndpointTimeout < c.cfg.DialTimeout {
		return c.cfg.EndpointTimeout
	}
	return c.cfg.DialTimeout
}
