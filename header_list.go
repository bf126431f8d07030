package acemq

import (
	"cmp"
	"slices"
)

// header is one application header of an envelope.
type header struct {
	name  string
	value any
}

// headerList holds an envelope's application headers sorted by name, each
// name once. An envelope keeps them in a list rather than a map because
// it is built once per message and read a few times: a list of a few
// entries costs one allocation and no hashing, where a map costs two and
// a hash per entry, and writing the headers out walks a slice rather than
// iterating a map. Envelope.Headers still returns a map.
type headerList []header

// sort orders l by name.
func (l headerList) sort() {
	if len(l) > 12 {
		slices.SortFunc(l, func(a, b header) int { return cmp.Compare(a.name, b.name) })
		return
	}
	// A message carries a few application headers: an insertion sort
	// costs less than the general sort's set-up.
	for i := 1; i < len(l); i++ {
		for j := i; j > 0 && l[j].name < l[j-1].name; j-- {
			l[j], l[j-1] = l[j-1], l[j]
		}
	}
}

// get returns the value of the header named name.
func (l headerList) get(name string) (any, bool) {
	i, ok := slices.BinarySearchFunc(l, name, func(h header, name string) int { return cmp.Compare(h.name, name) })
	if !ok {
		return nil, false
	}
	return l[i].value, true
}
