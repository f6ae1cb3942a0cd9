package stream

import (
	"strconv"
	"testing"
)

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"32768K", "1M", "2G", "512", "0K", "-1K", "K", "", "9223372036854775807K", "1.5M"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := parseSize(s)
		if err != nil {
			return
		}
		if v <= 0 {
			t.Fatalf("parseSize(%q) = %d without error", s, v)
		}
		if plain, perr := strconv.ParseInt(s, 10, 64); perr == nil && plain != v {
			t.Fatalf("parseSize(%q) = %d, want %d", s, v, plain)
		}
	})
}
