package result

import (
	"bytes"
	"os"
	"testing"
)

func FuzzParse(f *testing.F) {
	for _, name := range []string{"dgemm-openblas-2proc.json", "stream-2proc.json"} {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"benchmark":"stream","unit":"GB/s","processes":[{"rank":0,"pid":1}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		run, err := Parse(bytes.NewReader(data))
		if err != nil {
			return
		}
		var out bytes.Buffer
		if err := WriteTable(&out, run); err != nil {
			t.Fatalf("valid run failed to print: %v", err)
		}
	})
}
