// Package webpushtest provides a fake push service on a loopback listener that independently verifies VAPID and decrypts aes128gcm messages.
package webpushtest
