package spec

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// TestExampleDocumentsEveryKey: every key the spec takes appears in
// examples/cluster.yaml, the reference for every field (as a key, or in a
// commented-out line), so no option exists that the manual does not name.
func TestExampleDocumentsEveryKey(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", "cluster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	keys := specKeys(reflect.TypeOf(Spec{}), "")
	if len(keys) < 40 {
		t.Fatalf("found only %d spec keys: does the walk still see the yaml tags?", len(keys))
	}
	for _, k := range keys {
		name := k[strings.LastIndex(k, ".")+1:]
		if !regexp.MustCompile(`(?m)^[\s#-]*` + regexp.QuoteMeta(name) + `:`).MatchString(doc) {
			t.Errorf("spec key %s is not in examples/cluster.yaml: document it there", k)
		}
	}
}

// specKeys lists the yaml keys of t's fields, depth first, as dotted paths.
func specKeys(t reflect.Type, prefix string) []string {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	var keys []string
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if tag == "-" || !f.IsExported() {
			continue
		}
		if tag == "" { // inlined or untagged: walk into it
			keys = append(keys, specKeys(f.Type, prefix)...)
			continue
		}
		keys = append(keys, prefix+tag)
		if f.Type.Kind() != reflect.Map { // etcd flags: free-form
			keys = append(keys, specKeys(f.Type, prefix+tag+".")...)
		}
	}
	return keys
}
