// Package webpush sends RFC 8291 encrypted, RFC 8292 VAPID-signed browser push messages and validates the subscriptions browsers register.
package webpush
