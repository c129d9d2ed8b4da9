package spec

import "fmt"

// doc is one spec file being parsed: where each key was found and the
// problems found so far. Validation looks lines up by the same dotted path
// that it prints, e.g. "members[1].peerURLs[0]".
type doc struct {
	file string
	// lines holds the line of every key and list item that was present.
	lines map[string]int
	// given holds the keys present with a non-null value: only those
	// escape defaulting, so that "interval: 0s" is an error, not a default.
	given map[string]bool
	// broken holds paths whose node had the wrong shape and was already
	// reported, so that later checks do not pile onto the same mistake.
	broken map[string]bool
	errs   Errors
	// warns are problems that do not make the spec invalid (yet).
	warns Errors
}

func newDoc(file string) *doc {
	return &doc{
		file:   file,
		lines:  map[string]int{},
		given:  map[string]bool{},
		broken: map[string]bool{},
	}
}

func (d *doc) errorf(line int, format string, args ...any) {
	if line < 1 {
		line = 1
	}
	d.errs = append(d.errs, Error{File: d.file, Line: line, Msg: fmt.Sprintf(format, args...)})
}

// line is the line of the first of paths that was present in the file, or
// 1: an error about a missing key points at its nearest written parent.
func (d *doc) line(paths ...string) int {
	for _, p := range paths {
		if l, ok := d.lines[p]; ok {
			return l
		}
	}
	return 1
}

func (d *doc) failed() error {
	d.errs.sortByLine()
	errs := d.errs
	return &errs
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func index(path string, i int) string {
	return fmt.Sprintf("%s[%d]", path, i)
}
