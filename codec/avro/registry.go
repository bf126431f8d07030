package avro

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"

	hamba "github.com/hamba/avro/v2"
)

// ErrNotFound is returned by a Store (and a Registry) for a schema id it
// holds nothing under.
var ErrNotFound = errors.New("no schema with that id")

// ErrConflict is returned by Store.Put for an id that holds other bytes,
// or bytes already stored under another id.
var ErrConflict = errors.New("the schema id or schema is already registered differently")

// Fingerprint is the SHA-256 of a schema's exact bytes (docs/wire.md §4.3).
func Fingerprint(schema string) [32]byte { return sha256.Sum256([]byte(schema)) }

// Store keeps schemas by id. Its methods must be safe for concurrent use.
type Store interface {
	// Register stores schema under a new id unless the same bytes
	// (the same fingerprint) are stored already, and returns the id.
	Register(ctx context.Context, fingerprint [32]byte, schema string) (id uint32, err error)
	// Put stores schema under an id another registry assigned. Storing
	// the same bytes under the same id again succeeds; anything else that
	// clashes is ErrConflict.
	Put(ctx context.Context, id uint32, fingerprint [32]byte, schema string) error
	// Get returns the schema stored under id, or ErrNotFound.
	Get(ctx context.Context, id uint32) (string, error)
}

// Registry assigns and finds schema ids, keeping parsed schemas in memory.
// It is safe for concurrent use.
type Registry struct {
	store  Store
	mu     sync.RWMutex
	parsed map[uint32]hamba.Schema
	texts  map[uint32]string
}

// NewRegistry returns a registry over store.
func NewRegistry(store Store) *Registry {
	if store == nil {
		panic("avro: NewRegistry needs a Store, for example avro.NewMemoryStore()")
	}
	return &Registry{store: store, parsed: map[uint32]hamba.Schema{}, texts: map[uint32]string{}}
}

// Register stores schema (which must parse as Avro) and returns its id:
// the same id for the same bytes every time.
func (r *Registry) Register(ctx context.Context, schema string) (uint32, error) {
	s, err := parse(schema)
	if err != nil {
		return 0, fmt.Errorf("avro: %w", err)
	}
	id, err := r.store.Register(ctx, Fingerprint(schema), schema)
	if err != nil {
		return 0, fmt.Errorf("avro: registering a schema: %w", err)
	}
	r.keep(id, schema, s)
	return id, nil
}

// Put stores schema under id, an id another registry assigned (importing
// schemas of a Confluent-compatible registry, or a fixture's).
func (r *Registry) Put(ctx context.Context, id uint32, schema string) error {
	s, err := parse(schema)
	if err != nil {
		return fmt.Errorf("avro: %w", err)
	}
	if err := r.store.Put(ctx, id, Fingerprint(schema), schema); err != nil {
		return fmt.Errorf("avro: storing schema %d: %w", id, err)
	}
	r.keep(id, schema, s)
	return nil
}

func (r *Registry) keep(id uint32, text string, s hamba.Schema) {
	r.mu.Lock()
	r.parsed[id], r.texts[id] = s, text
	r.mu.Unlock()
}

// Schema returns the exact text of schema id.
func (r *Registry) Schema(ctx context.Context, id uint32) (string, error) {
	if _, err := r.schema(ctx, id); err != nil {
		return "", fmt.Errorf("avro: %w", err)
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.texts[id], nil
}

// schema returns the parsed schema id, from memory or the store.
func (r *Registry) schema(ctx context.Context, id uint32) (hamba.Schema, error) {
	r.mu.RLock()
	s, ok := r.parsed[id]
	r.mu.RUnlock()
	if ok {
		return s, nil
	}
	text, err := r.store.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	s, err = parse(text)
	if err != nil {
		return nil, fmt.Errorf("schema %d in the store: %w", id, err)
	}
	r.keep(id, text, s)
	return s, nil
}

// parse parses schema with a cache of its own: named types of one schema
// must not leak into another's (the family's cases reuse a record name).
func parse(schema string) (hamba.Schema, error) {
	s, err := hamba.ParseWithCache(schema, "", &hamba.SchemaCache{})
	if err != nil {
		return nil, fmt.Errorf("not an Avro schema: %w", err)
	}
	return s, nil
}

// MemoryStore is a Store in memory, for tests and single-process use. Ids
// start at 1.
type MemoryStore struct {
	mu     sync.Mutex
	byID   map[uint32]string
	byFP   map[[32]byte]uint32
	nextID uint32
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{byID: map[uint32]string{}, byFP: map[[32]byte]uint32{}}
}

// Register implements Store.
func (m *MemoryStore) Register(_ context.Context, fp [32]byte, schema string) (uint32, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if id, ok := m.byFP[fp]; ok {
		return id, nil
	}
	for {
		m.nextID++
		if _, taken := m.byID[m.nextID]; !taken {
			break
		}
	}
	m.byID[m.nextID], m.byFP[fp] = schema, m.nextID
	return m.nextID, nil
}

// Put implements Store.
func (m *MemoryStore) Put(_ context.Context, id uint32, fp [32]byte, schema string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.byID[id]; ok {
		if old == schema {
			return nil
		}
		return fmt.Errorf("id %d holds another schema: %w", id, ErrConflict)
	}
	if other, ok := m.byFP[fp]; ok {
		return fmt.Errorf("the same schema is stored under id %d: %w", other, ErrConflict)
	}
	m.byID[id], m.byFP[fp] = schema, id
	return nil
}

// Get implements Store.
func (m *MemoryStore) Get(_ context.Context, id uint32) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.byID[id]
	if !ok {
		return "", fmt.Errorf("schema id %d: %w", id, ErrNotFound)
	}
	return s, nil
}
