// Package hub fans committed messages out to live subscribers.
package hub
