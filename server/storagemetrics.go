package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"svc/server/vfs"
)

// storageMetrics are the metrics of the disk under the broker
// (docs/PERFORMANCE.md: Metrics): damage found in stored files.
type storageMetrics struct {
	// damage counts damaged file content found by kind, resolved once.
	damage map[string]prometheus.Counter
}

// newStorageMetrics registers the storage metrics on reg.
func newStorageMetrics(reg prometheus.Registerer) *storageMetrics {
	damage := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "svc_blob_damage_total",
		Help: "Stored file content found damaged on read, by kind: missing (no file), size_mismatch, hash_mismatch (the bytes do not hash to the blob's name).",
	}, []string{"kind"})
	m := &storageMetrics{damage: map[string]prometheus.Counter{}}
	for _, k := range []string{vfs.DamageMissing, vfs.DamageSize, vfs.DamageHash, "other"} {
		m.damage[k] = damage.WithLabelValues(k)
	}
	reg.MustRegister(damage)
	return m
}

// blobDamaged counts one damaged read of kind.
func (m *storageMetrics) blobDamaged(kind string) {
	c, ok := m.damage[kind]
	if !ok {
		c = m.damage["other"]
	}
	c.Inc()
}
