//go:build !linux

package relay

// NoDump does nothing where the runner has no portable way to keep other
// processes of the same user out of its memory (see nodump_linux.go).
func NoDump() error { return nil }
