package engine

import "github.com/acemq/acemq/driver"

// Inspector returns the connection's driver as a driver.Inspector, for
// package queues: false when the driver has no passive checks.
func (c *Conn) Inspector() (driver.Inspector, bool) {
	i, ok := c.t.(driver.Inspector)
	return i, ok
}

// Getter returns the connection's driver as a driver.Getter, for package
// queues' Browser: false when the driver cannot fetch without a consumer.
func (c *Conn) Getter() (driver.Getter, bool) {
	g, ok := c.t.(driver.Getter)
	return g, ok
}
