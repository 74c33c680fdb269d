// Package groupcommit batches concurrent writes: one goroutine takes every
// item waiting when it starts a batch and commits them together, so
// concurrent writers share one transaction and one fsync.
package groupcommit
