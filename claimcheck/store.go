package claimcheck

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// Store keeps offloaded payloads by key. Implementations must be safe for
// concurrent use. An S3 bucket, a database table or a cache is a short file:
// Put, Get (returning an error wrapping ErrNotFound for an absent key) and
// Delete.
//
// The codec only ever calls Put and Get; it never deletes. Removing payloads
// once nobody will read them (retention) is the store's business, or the
// application's through Delete.
type Store interface {
	// Put stores data under key, replacing anything stored there.
	Put(ctx context.Context, key string, data []byte) error
	// Get returns the data stored under key, or an error wrapping
	// ErrNotFound when there is none. Any other error is taken as the store
	// being unavailable, which the consumer retries.
	Get(ctx context.Context, key string) ([]byte, error)
	// Delete removes the data stored under key. Deleting an absent key is
	// not an error.
	Delete(ctx context.Context, key string) error
}

// ErrNotFound is wrapped by Store.Get for a key that holds nothing. Like
// the driver's sentinels it is a fragment, met wrapped in the words of the
// codec that asked the store.
var ErrNotFound = errors.New("no payload is stored under this key")

// ErrInvalidKey is wrapped by the stores of this package for a key that does
// not match [A-Za-z0-9][A-Za-z0-9._-]{0,127}. It is a fragment too.
var ErrInvalidKey = errors.New("invalid key")

// ValidKey reports whether key matches [A-Za-z0-9][A-Za-z0-9._-]{0,127}, the
// keys every store of the family accepts. The pattern admits no path
// separator and cannot begin with a dot, which rules out path traversal.
func ValidKey(key string) bool {
	if len(key) == 0 || len(key) > 128 {
		return false
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case i > 0 && (c == '.' || c == '_' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// checkCall is what every Store method here checks first: a valid key and a
// context that is not done.
func checkCall(ctx context.Context, key string) error {
	if !ValidKey(key) {
		return fmt.Errorf("%w %q: a key is 1 to 128 letters, digits, dots, underscores and dashes, beginning with a letter or digit", ErrInvalidKey, key)
	}
	return ctx.Err()
}

// MemoryStore is a Store in the process's memory, for tests and for a
// producer and consumer that share a process. Its payloads are lost when
// the process exits. The zero MemoryStore is ready to use.
type MemoryStore struct {
	mu   sync.RWMutex
	data map[string][]byte
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore { return &MemoryStore{} }

// Put stores a copy of data under key.
func (s *MemoryStore) Put(ctx context.Context, key string, data []byte) error {
	if err := checkCall(ctx, key); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.data == nil {
		s.data = make(map[string][]byte)
	}
	s.data[key] = append([]byte(nil), data...)
	return nil
}

// Get returns a copy of the data stored under key.
func (s *MemoryStore) Get(ctx context.Context, key string) ([]byte, error) {
	if err := checkCall(ctx, key); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	b, ok := s.data[key]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, key)
	}
	return append([]byte(nil), b...), nil
}

// Delete removes key.
func (s *MemoryStore) Delete(ctx context.Context, key string) error {
	if err := checkCall(ctx, key); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.data, key)
	return nil
}

// Len is the number of payloads held.
func (s *MemoryStore) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.data)
}

// DirStore is a Store that keeps each payload in a file named after its key
// in one directory. A Put writes a temporary file in the same directory and
// renames it into place, so a reader never sees a half-written payload and a
// crash leaves at most a stray temporary file (named ".claimcheck-*", which
// no valid key can collide with). Several processes may share the directory
// (a shared volume), since rename is atomic on one file system. Its errors,
// but for those wrapping ErrNotFound and ErrInvalidKey, are the file
// system's (*fs.PathError, *os.LinkError), which name the file; the codec
// wraps them in its own words ("claimcheck: storing a 7-byte payload under
// …: open …").
type DirStore struct {
	dir string
}

// NewDirStore returns a DirStore over dir, creating it (mode 0750) when it
// does not exist.
func NewDirStore(dir string) (*DirStore, error) {
	if dir == "" {
		return nil, errors.New("claimcheck: NewDirStore needs a directory")
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("claimcheck: creating the store directory: %w", err)
	}
	return &DirStore{dir: dir}, nil
}

// Dir is the directory the store writes to.
func (s *DirStore) Dir() string { return s.dir }

// Put writes data to a temporary file, syncs it and renames it to key.
func (s *DirStore) Put(ctx context.Context, key string, data []byte) (err error) {
	if err := checkCall(ctx, key); err != nil {
		return err
	}
	f, err := os.CreateTemp(s.dir, ".claimcheck-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = os.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(s.dir, key))
}

// Get reads the file named key.
func (s *DirStore) Get(ctx context.Context, key string) ([]byte, error) {
	if err := checkCall(ctx, key); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(s.dir, key))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %q in %s", ErrNotFound, key, s.dir)
	}
	if err != nil {
		return nil, err
	}
	return b, nil
}

// Delete removes the file named key; an absent file is not an error.
func (s *DirStore) Delete(ctx context.Context, key string) error {
	if err := checkCall(ctx, key); err != nil {
		return err
	}
	err := os.Remove(filepath.Join(s.dir, key))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
