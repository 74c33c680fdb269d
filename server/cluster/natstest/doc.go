// Package natstest runs a nats-server embedded from its Go module for
// tests: on 127.0.0.1, on a port the kernel picks, stopped when the test
// ends. No binary to install, the same on a developer's machine and CI.
package natstest
