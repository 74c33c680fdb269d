package genai_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"svc/server/genai"
)

func BenchmarkParse(b *testing.B) {
	for _, set := range []struct {
		name string
		fx   fixture
	}{
		{"anthropic", anthropicFixtures[0]},
		{"chat", chatFixtures[0]},
		{"responses", responsesFixtures[0]},
	} {
		b.Run(set.name, func(b *testing.B) {
			data := body(set.fx.req, set.fx.resp)
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				u, err := genai.DecodeUpload(data)
				require.NoError(b, err)
				_, err = genai.Parse(u)
				require.NoError(b, err)
			}
		})
	}
}
