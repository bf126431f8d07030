package fifo

import "testing"

// TestQueueOrderAndBound: items come out in the order they went in, through
// any mix of pushes and pops, and a queue that never holds more than n items
// does not keep growing its slice.
func TestQueueOrderAndBound(t *testing.T) {
	var q Queue[int]
	next, want := 0, 0
	for round := range 1000 {
		for range round%7 + 1 {
			q.Push(next)
			next++
		}
		for q.Len() > 5 {
			if got := q.Pop(); got != want {
				t.Fatalf("popped %d, want %d", got, want)
			}
			want++
		}
		if q.Len() > 0 && *q.Front() != want {
			t.Fatalf("front is %d, want %d", *q.Front(), want)
		}
	}
	for q.Len() > 0 {
		if got := q.Pop(); got != want {
			t.Fatalf("popped %d, want %d", got, want)
		}
		want++
	}
	if want != next {
		t.Fatalf("%d pushed, %d popped", next, want)
	}
	// At most 5 + 7 items at once: the slice stays near that.
	if c := cap(q.items); c > 64 {
		t.Errorf("the slice grew to %d for a queue of at most 12", c)
	}
}

// TestPopClearsTheSlot: a popped item is not kept alive by the slice.
func TestPopClearsTheSlot(t *testing.T) {
	var q Queue[*int]
	v := new(int)
	q.Push(v)
	q.Push(new(int))
	if q.Pop() != v {
		t.Fatal("popped the wrong item")
	}
	if q.items[0] != nil {
		t.Error("the popped slot still holds the item")
	}
}
