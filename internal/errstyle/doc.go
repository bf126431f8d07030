// Package errstyle holds the test that keeps the module's error messages to
// the convention stated in the package acemq documentation ("Errors"): a
// message is a lower-case fragment with no final period, and the only
// package name it may begin with is that of the package that makes it.
// The package has no code; its test walks the module's sources.
package errstyle
