package spec

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// field decodes the value of one known key found at path.
type field func(path string, value *yaml.Node)

// decodeSpec walks the root node by hand instead of yaml's struct decoding:
// that is what gives every problem a line and makes unknown keys errors. It
// reports false when the root is not a mapping and nothing else is worth
// checking.
func (d *doc) decodeSpec(root *yaml.Node, s *Spec) bool {
	root = resolve(root)
	if !isNull(root) && root.Kind != yaml.MappingNode {
		d.errorf(root.Line, "the spec must be a mapping with cluster:, members: and optional sections such as etcd:, agent:, repair:, found %s", describe(root))
		return false
	}
	d.mapping(root, "", d.fields(s))
	return true
}

// fields is the key table of the struct ptr points to: each field's YAML
// key is its yaml tag (fields without one, or with "-", are not in the
// file), and how it is read follows from its Go type. So the tags in
// types.go define the keys, for this decoder and yaml.Marshal alike.
func (d *doc) fields(ptr any) map[string]field {
	v := reflect.ValueOf(ptr).Elem()
	fields := map[string]field{}
	for i := range v.NumField() {
		if key := v.Type().Field(i).Tag.Get("yaml"); key != "" && key != "-" {
			fields[key] = d.fieldOf(v.Field(i).Addr().Interface())
		}
	}
	return fields
}

// fieldOf is the reader for one field, by the type ptr points to.
func (d *doc) fieldOf(ptr any) field {
	switch p := ptr.(type) {
	case *string:
		return d.str(p)
	case *[]string:
		return d.strs(p)
	case *Duration:
		return d.duration(p)
	case **bool:
		return d.boolean(p)
	case *bool:
		return d.switchField(p)
	case *int:
		return integer(d, p)
	case *int64:
		return integer(d, p)
	case *map[string]string:
		return d.flags(p)
	case *[]Member:
		return d.members(p)
	case *[]TLSOther:
		return d.others(p)
	case *Ratio:
		return d.ratio(p)
	case *Size:
		return d.size(p)
	case *Window:
		return d.window(p)
	}
	if reflect.TypeOf(ptr).Elem().Kind() == reflect.Struct {
		return d.object(d.fields(ptr))
	}
	panic(fmt.Sprintf("spec: no YAML reader for a field of type %T", ptr))
}

// mapping dispatches each key of n to its field; null n is an empty mapping.
func (d *doc) mapping(n *yaml.Node, path string, fields map[string]field) {
	n = resolve(n)
	if isNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		d.wrongShape(n, path, "a mapping (key: value lines)")
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		d.key(n.Content[i], n.Content[i+1], path, fields)
	}
}

func (d *doc) key(k, v *yaml.Node, path string, fields map[string]field) {
	k = resolve(k)
	if k == nil || k.Kind != yaml.ScalarNode || k.Tag == "!!merge" {
		d.errorf(keyLine(k, v), "%s: keys must be plain names (merge keys << are not supported: write the fields out)", label(path))
		return
	}
	p := join(path, k.Value)
	f, ok := fields[k.Value]
	if !ok {
		d.errorf(k.Line, "%s: unknown key%s", p, suggest(k.Value, fields))
		return
	}
	if first, dup := d.lines[p]; dup {
		d.errorf(k.Line, "%s: repeated key, first set at line %d: keep one", p, first)
		return
	}
	d.lines[p] = k.Line
	d.given[p] = !isNull(resolve(v))
	f(p, v)
}

func keyLine(k, v *yaml.Node) int {
	if k != nil {
		return k.Line
	}
	return v.Line
}

// suggest names the known key that differs only in case, the usual typo
// (peerUrls for peerURLs), or lists the known keys.
func suggest(key string, fields map[string]field) string {
	names := make([]string, 0, len(fields))
	for name := range fields {
		if strings.EqualFold(name, key) {
			return ": did you mean " + name + "?"
		}
		names = append(names, name)
	}
	slices.Sort(names)
	return ": remove it or use one of " + strings.Join(names, ", ")
}

func (d *doc) object(fields map[string]field) field {
	return func(path string, n *yaml.Node) { d.mapping(n, path, fields) }
}

func (d *doc) members(dst *[]Member) field {
	return func(path string, n *yaml.Node) {
		n = resolve(n)
		if isNull(n) {
			return
		}
		if n.Kind != yaml.SequenceNode {
			d.wrongShape(n, path, "a list of members (- name: ...)")
			return
		}
		for i, item := range n.Content {
			*dst = append(*dst, d.member(index(path, i), item))
		}
	}
}

func (d *doc) member(path string, item *yaml.Node) Member {
	m := Member{Line: item.Line}
	d.lines[path] = item.Line
	if n := resolve(item); n == nil || n.Kind != yaml.MappingNode {
		d.wrongShape(item, path, "a mapping with name:, peerURLs: and clientURLs:")
		return m
	}
	d.mapping(item, path, d.fields(&m))
	return m
}

// others reads tls.renew.others, a list of mappings like members.
func (d *doc) others(dst *[]TLSOther) field {
	return func(path string, n *yaml.Node) {
		n = resolve(n)
		if isNull(n) {
			return
		}
		if n.Kind != yaml.SequenceNode {
			d.wrongShape(n, path, "a list of certificates (- name: ..., certFile: ..., keyFile: ...)")
			return
		}
		for i, item := range n.Content {
			p := index(path, i)
			d.lines[p] = item.Line
			var o TLSOther
			if it := resolve(item); it == nil || it.Kind != yaml.MappingNode {
				d.wrongShape(item, p, "a mapping with name:, certFile: and keyFile:")
			} else {
				d.mapping(item, p, d.fields(&o))
			}
			*dst = append(*dst, o)
		}
	}
}

func (d *doc) str(dst *string) field {
	return func(path string, n *yaml.Node) {
		if s, ok := d.scalar(path, n, "a string"); ok {
			*dst = s
		}
	}
}

// strs reads a list of strings; each item's line is kept under path[i].
func (d *doc) strs(dst *[]string) field {
	return func(path string, n *yaml.Node) {
		n = resolve(n)
		if isNull(n) {
			return
		}
		if n.Kind != yaml.SequenceNode {
			d.wrongShape(n, path, "a list, e.g. [http://10.0.0.1:2380]")
			return
		}
		// Every item is kept, empty if unusable, so that item i is
		// still reported as path[i].
		for i, item := range n.Content {
			p := index(path, i)
			d.lines[p] = item.Line
			s, _ := d.scalar(p, item, "a string")
			*dst = append(*dst, s)
		}
	}
}

func (d *doc) duration(dst *Duration) field {
	return func(path string, n *yaml.Node) {
		n = resolve(n)
		if isNull(n) {
			return
		}
		v, err := durationOf(n)
		if err != nil {
			d.errorf(n.Line, "%s: %v", path, err)
			d.broken[path] = true
			return
		}
		*dst = v
	}
}

func (d *doc) boolean(dst **bool) field {
	return func(path string, n *yaml.Node) {
		n = resolve(n)
		if isNull(n) {
			return
		}
		var v bool
		if n.Kind != yaml.ScalarNode || n.Decode(&v) != nil {
			d.errorf(n.Line, "%s: must be true or false, found %s", path, describe(n))
			return
		}
		*dst = &v
	}
}

// switchField reads a true/false that defaults to false, so it needs no
// pointer to tell "not given" apart.
func (d *doc) switchField(dst *bool) field {
	return func(path string, n *yaml.Node) {
		var v *bool
		d.boolean(&v)(path, n)
		if v != nil {
			*dst = *v
		}
	}
}

// integer is a function, not a method: methods cannot be generic.
func integer[T int | int64](d *doc, dst *T) field {
	return func(path string, n *yaml.Node) {
		n = resolve(n)
		if isNull(n) {
			return
		}
		var v T
		if n.Kind != yaml.ScalarNode || n.Tag != "!!int" || n.Decode(&v) != nil {
			d.errorf(n.Line, "%s: must be a whole number, found %s", path, describe(n))
			d.broken[path] = true
			return
		}
		*dst = v
	}
}

// scalar reads a plain value; numbers and booleans are taken as written, so
// a member may be called 001.
func (d *doc) scalar(path string, n *yaml.Node, want string) (string, bool) {
	n = resolve(n)
	if isNull(n) {
		return "", false
	}
	if n.Kind != yaml.ScalarNode {
		d.wrongShape(n, path, want)
		return "", false
	}
	return n.Value, true
}

func (d *doc) wrongShape(n *yaml.Node, path, want string) {
	d.errorf(n.Line, "%s: must be %s, found %s", label(path), want, describe(n))
	d.broken[path] = true
}

func label(path string) string {
	if path == "" {
		return "spec"
	}
	return path
}

// resolve follows aliases (*name) to the anchored node. Anchors cannot
// point at aliases, the bound only guards against a malformed tree.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 8; i++ {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n == nil || n.Kind == 0 || n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

func describe(n *yaml.Node) string {
	n = resolve(n)
	switch {
	case isNull(n):
		return "nothing"
	case n.Kind == yaml.MappingNode:
		return "a mapping"
	case n.Kind == yaml.SequenceNode:
		return "a list"
	case n.Kind == yaml.ScalarNode:
		return quote(n.Value)
	}
	return "an alias"
}
