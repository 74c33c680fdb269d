//go:build race

package e2e

// raceEnabled: the race detector's shadow memory is never returned to the
// system, so a process's RSS says nothing of what the broker released.
const raceEnabled = true
