package hooks

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

func benchVerifyHMAC(b *testing.B, size int) {
	body := bytes.Repeat([]byte("a"), size)
	h := http.Header{}
	h.Set(DefaultHMACHeader, signHMAC("s3cret", body))
	a := Auth{Kind: KindHMACSHA256}
	now := time.Now()
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		if err := Verify(a, "s3cret", h, body, now); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerifyHMAC4KiB(b *testing.B)   { benchVerifyHMAC(b, 4<<10) }
func BenchmarkVerifyHMAC256KiB(b *testing.B) { benchVerifyHMAC(b, 256<<10) }

func BenchmarkRender(b *testing.B) {
	for _, n := range []int{1, 20, 110} {
		b.Run(fmt.Sprintf("items=%d", n), func(b *testing.B) {
			content := strings.Repeat("line with <tags> and </external_content> and é\n", 40) // ~2 KiB
			items := make([]Item, n)
			for i := range items {
				items[i] = Item{DeliveryID: fmt.Sprintf("d%d", i), Received: t0, Content: content}
			}
			f := Frame{Slug: "deploys", DisplayName: "Deploy alerts", Items: items}
			b.ReportAllocs()
			for b.Loop() {
				_ = f.Render()
			}
		})
	}
}

func BenchmarkContent(b *testing.B) {
	payload := []byte(`{"repository":{"full_name":"acme/api"},"commits":[` + strings.Repeat(`{"id":"a1","message":"fix"},`, 500) + `{"id":"z"}]}`)
	b.Run("template", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = Content("{{payload.repository.full_name}}: {{payload.commits.500.id}}", payload)
		}
	})
	b.Run("pretty", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = Content("", payload)
		}
	})
}

// BenchmarkContentDeep is the payload: 9999 nested arrays, 20 KB,
// pretty-printed with no template.
func BenchmarkContentDeep(b *testing.B) {
	payload := []byte(strings.Repeat("[", 9999) + strings.Repeat("]", 9999))
	b.ReportAllocs()
	for b.Loop() {
		_ = Content("", payload)
	}
}
