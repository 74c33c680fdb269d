package main

import "testing"

func TestGCPercent(t *testing.T) {
	for _, tt := range []struct {
		gogc    string
		want    int
		wantSet bool
	}{
		{gogc: "", want: defaultGCPercent, wantSet: true},
		{gogc: "100", wantSet: false},
		{gogc: "off", wantSet: false},
	} {
		got, set := gcPercent(func(k string) string {
			if k == "GOGC" {
				return tt.gogc
			}
			return ""
		})
		if set != tt.wantSet || (set && got != tt.want) {
			t.Errorf("GOGC=%q: gcPercent = %d, %v; want %d, %v", tt.gogc, got, set, tt.want, tt.wantSet)
		}
	}
}
