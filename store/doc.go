// Package store defines the persistence contract of svc: records, the
// per-aggregate interfaces and the sentinel errors every backend returns.
//
// One file per aggregate (members, tokens, sessions, messages, channels,
// pushsubs, objectives, fs, activity) holds its records and interface;
// store.go composes them into Tx and Store. The backends (sqlite) and the
// conformance suite (storetest) have the same files.
package store
