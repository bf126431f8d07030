package console

// SetReadHook makes every read of a queue by a console call f before it
// reads each message (and once more when it is done), so that a test can
// measure what a look holds while it runs. It returns a function restoring
// the previous hook.
func SetReadHook(f func()) (restore func()) {
	old := readHook
	readHook = f
	return func() { readHook = old }
}
