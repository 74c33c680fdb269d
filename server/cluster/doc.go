// Package cluster fans committed records out across brokers over core
// NATS and hands each broker's hub every broker's records in commit order,
// each once, reading from the store whatever NATS lost
// (docs/DECISIONS.md, "Several brokers: fan-out on NATS").
package cluster
