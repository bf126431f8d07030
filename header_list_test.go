package acemq

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// sort orders a list by name whatever its length: short lists (insertion
// sort) and long ones (the general sort) alike, duplicates of a prefix
// and already sorted or reversed input included.
func TestHeaderListSort(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for n := range 40 {
		for round := range 20 {
			l := make(headerList, n)
			for i := range l {
				l[i] = header{fmt.Sprintf("h%d", r.IntN(1000)), i}
			}
			switch round {
			case 0:
				slices.SortFunc(l, func(a, b header) int { return compareNames(a.name, b.name) })
			case 1:
				slices.SortFunc(l, func(a, b header) int { return compareNames(b.name, a.name) })
			}
			l.sort()
			if !slices.IsSortedFunc(l, func(a, b header) int { return compareNames(a.name, b.name) }) {
				t.Fatalf("%d headers, round %d: not sorted: %v", n, round, l)
			}
		}
	}
}

func compareNames(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
