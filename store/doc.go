// Package store defines the persistence contract of svc: records, the
// per-aggregate interfaces and the sentinel errors every backend returns.
package store
