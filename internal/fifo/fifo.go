// Package fifo is a first-in, first-out queue on a slice, for the
// publishes of one sequence awaiting their results (package acemq and the
// rabbitmq driver): pushing and popping cost no allocation once the slice
// has grown to the most the queue holds at once.
package fifo

// Queue is a first-in, first-out queue of T. The zero value is empty and
// ready to use. A Queue is not safe for concurrent use.
type Queue[T any] struct {
	items []T // the queue is items[head:]
	head  int
}

// Len reports how many items q holds.
func (q *Queue[T]) Len() int { return len(q.items) - q.head }

// Push adds v at the back of q.
func (q *Queue[T]) Push(v T) {
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	} else if len(q.items) == cap(q.items) && q.head >= len(q.items)/2 {
		// Move the live half down rather than grow: at most half of the
		// slice is copied, and only after as many pops.
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
	q.items = append(q.items, v)
}

// Front returns the item at the front of q, which must not be empty.
func (q *Queue[T]) Front() *T { return &q.items[q.head] }

// At returns the i-th item from the front of q (At(0) is Front()); i must
// be less than Len().
func (q *Queue[T]) At(i int) *T { return &q.items[q.head+i] }

// Pop removes and returns the item at the front of q, which must not be
// empty.
func (q *Queue[T]) Pop() T {
	v := q.items[q.head]
	var zero T
	q.items[q.head] = zero // let the garbage collector have what v refers to
	q.head++
	return v
}
