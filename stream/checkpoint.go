package stream

import (
	"context"
	"sync"
)

// Checkpoints stores readers' positions: nothing on the broker remembers
// where a reader got to over AMQP 0-9-1 (docs/wire.md §5.9). A Reader given
// a store with WithCheckpoints starts after the offset saved under its name
// and saves as it goes. Implementations must be safe for concurrent use.
//
// This package has Memory; package stream/sqlcheckpoint keeps them in
// PostgreSQL.
type Checkpoints interface {
	// Load returns the last offset saved for the reader name, or false when
	// none is.
	Load(ctx context.Context, name string) (offset int64, ok bool, err error)
	// Save records that the reader name has settled everything up to and
	// including offset.
	Save(ctx context.Context, name string, offset int64) error
}

// Memory is a Checkpoints kept in the process: for tests, and for readers
// that only need to survive a reconnection, not a restart. The zero value
// is ready to use.
type Memory struct {
	mu  sync.Mutex
	pos map[string]int64
}

// Load returns the offset saved for name.
func (m *Memory) Load(_ context.Context, name string) (int64, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	off, ok := m.pos[name]
	return off, ok, nil
}

// Save records offset for name.
func (m *Memory) Save(_ context.Context, name string, offset int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.pos == nil {
		m.pos = map[string]int64{}
	}
	m.pos[name] = offset
	return nil
}
