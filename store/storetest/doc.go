// Package storetest is the conformance suite every store implementation,
// fakes included, runs from its own tests.
package storetest
