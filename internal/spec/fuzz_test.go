package spec

import (
	"errors"
	"reflect"
	"testing"

	"gopkg.in/yaml.v3"
)

// FuzzParse: Parse never panics; what it rejects it explains with located
// errors; what it accepts has usable member names and survives being
// written back out. Seeds: testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(data, "fuzz.yaml")
		if err != nil {
			checkErrors(t, err)
			return
		}
		seen := map[string]bool{}
		for _, m := range s.Members {
			if m.Name == "" || seen[m.Name] {
				t.Fatalf("accepted a spec with member name %q empty or repeated", m.Name)
			}
			seen[m.Name] = true
		}
		out, err := yaml.Marshal(s)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		again, err := Parse(out, "fuzz.yaml")
		if err != nil {
			t.Fatalf("accepted spec, written back out, fails: %v\n%s", err, out)
		}
		if a, b := comparable(s), comparable(again); !reflect.DeepEqual(a, b) {
			t.Fatalf("round trip changed the spec:\n got %+v\nwant %+v", b, a)
		}
	})
}

func checkErrors(t *testing.T, err error) {
	t.Helper()
	var errs *Errors
	if !errors.As(err, &errs) || len(*errs) == 0 {
		t.Fatalf("error %T %q is not a non-empty *Errors", err, err)
	}
	for _, e := range *errs {
		if e.File != "fuzz.yaml" || e.Line < 1 || e.Msg == "" {
			t.Fatalf("error without file, line or message: %#v", e)
		}
	}
}
