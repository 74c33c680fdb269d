// Package pricing is the model price table: what a million tokens of each
// kind (input, output, cache read, cache write) cost per model, shipped in
// the binary with its sources and date, overridable by a prices.json beside
// the team config; model ids match exactly, then by the longest key they
// extend with a snapshot suffix only (docs/TELEMETRY.md, Costs).
package pricing
