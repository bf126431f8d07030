//go:build !race

package acemq

// raceEnabled: the tests were built with -race, under which allocation
// counts are not exact.
const raceEnabled = false
