//go:build !race

package perf

// raceDetector reports whether the tests were built with -race, under
// which allocation counts pick up the detector's own and are not exact.
const raceDetector = false
