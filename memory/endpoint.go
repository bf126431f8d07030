package memory

import "github.com/acemq/acemq/driver"

var _ driver.EndpointReporter = (*conn)(nil)

// Endpoint implements driver.EndpointReporter: the broker's URL,
// memory://NAME, while the connection is open; "" once it is closed. A
// memory broker has one node: further URLs given to Open are ignored.
func (c *conn) Endpoint() string {
	c.b.mu.Lock()
	defer c.b.mu.Unlock()
	if c.closed {
		return ""
	}
	return "memory://" + c.b.name
}
