package spec

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/etcdkeeper/etcdkeeper/internal/safefile"
)

// MaxFileBytes bounds a spec file: a real one is a few kB; /dev/zero or a
// huge file is refused before it is read.
const MaxFileBytes = 1 << 20

// Load reads, defaults and validates the spec file at path. Relative paths
// in the file (dataDir, stateDir, backupDir) are taken relative to the
// file's own directory, so a spec means the same whatever the agent's
// working directory is.
//
// Problems in the file come back as *Errors, all of them at once. A file
// that cannot be read comes back as a wrapped os error (errors.Is(err,
// fs.ErrNotExist) works): it is not a problem in the spec. Only a regular
// file of at most MaxFileBytes is read.
func Load(path string) (*Spec, error) {
	data, err := safefile.Read(path, MaxFileBytes)
	if err != nil {
		return nil, fmt.Errorf("read spec: %w", err)
	}
	s, d, err := parse(data, path)
	if err != nil {
		return nil, err
	}
	// The external etcd binary is run (--version) only for a file read
	// from disk, never for bytes given to Parse (a fuzzer's).
	if errs := d.checkEtcdBinary(s, ReadBinary); len(errs) > 0 {
		return nil, &errs
	}
	return s, nil
}

// Parse is Load on bytes already read; path names the file in errors and
// anchors relative paths.
func Parse(data []byte, path string) (*Spec, error) {
	s, _, err := parse(data, path)
	return s, err
}

func parse(data []byte, path string) (*Spec, *doc, error) {
	d := newDoc(path)
	root := d.readYAML(data)
	if len(d.errs) > 0 {
		return nil, nil, d.failed()
	}
	s := &Spec{}
	if !d.decodeSpec(root, s) {
		return nil, nil, d.failed()
	}
	d.checkFields(s)
	d.applyDefaults(s, baseDir(path))
	d.checkMembers(s)
	d.checkHostTurnTimeout(s)
	d.checkSecurity(s)
	if len(d.errs) > 0 {
		return nil, nil, d.failed()
	}
	s.Path = path
	s.Generation = generation(data)
	if l, ok := d.lines["etcd.binary"]; ok {
		s.Etcd.Line = l
	} else {
		s.Etcd.Line = d.lines["etcd"]
	}
	d.warns.sortByLine()
	s.Warnings = d.warns
	return s, d, nil
}

func generation(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])[:12]
}

// baseDir is the absolute directory of the spec file, so that resolved
// paths survive a later chdir.
func baseDir(path string) string {
	dir := filepath.Dir(path)
	if abs, err := filepath.Abs(dir); err == nil {
		return abs
	}
	return dir
}

// readYAML parses data into its single document's root node; nil means an
// empty file. Syntax errors are recorded with their line.
func (d *doc) readYAML(data []byte) *yaml.Node {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var first yaml.Node
	if err := dec.Decode(&first); err != nil {
		if !errors.Is(err, io.EOF) {
			d.syntaxError(data, err)
		}
		return nil
	}
	var second yaml.Node
	switch err := dec.Decode(&second); {
	case err == nil:
		d.errorf(second.Line, "a second YAML document starts here: the spec must be one document; remove the extra ---")
	case !errors.Is(err, io.EOF):
		d.syntaxError(data, err)
	}
	if len(first.Content) == 0 {
		return nil
	}
	return first.Content[0]
}

var (
	yamlLine      = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)
	unknownAnchor = regexp.MustCompile(`unknown anchor '(.*)' referenced`)
)

// parserProblems are yaml.v3's parser (not scanner) errors. yaml.v3 v3.0.1
// prints their 0-based line, one less than the line an editor shows; its
// scanner errors are already 1-based.
var parserProblems = []string{
	"did not find expected ',' or ']'",
	"did not find expected ',' or '}'",
	"did not find expected '-' indicator",
	"did not find expected <document start>",
	"did not find expected <stream-start>",
	"did not find expected key",
	"did not find expected node content",
	"found duplicate %TAG directive",
	"found duplicate %YAML directive",
	"found incompatible YAML document",
	"found undefined tag handle",
}

// syntaxError records a yaml.v3 error. yaml.v3 puts the line in the message
// except for problems on line 1, bad anchors and bad bytes, so those are
// located here.
func (d *doc) syntaxError(data []byte, err error) {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		if slices.Contains(parserProblems, m[2]) {
			line++
		}
		// A problem found at the end of the stream is placed on a line
		// after the last one; point at the last line instead.
		d.errorf(min(line, lineCount(data)), "YAML syntax: %s", m[2])
		return
	}
	msg = strings.TrimPrefix(msg, "yaml: ")
	d.errorf(syntaxLine(data, msg), "YAML syntax: %s", msg)
}

func syntaxLine(data []byte, msg string) int {
	if m := unknownAnchor.FindStringSubmatch(msg); m != nil {
		if i := bytes.Index(data, []byte("*"+m[1])); i >= 0 {
			return lineAt(data, i)
		}
	}
	if i := firstUnreadable(data); i >= 0 {
		return lineAt(data, i)
	}
	return 1
}

// firstUnreadable is the offset of the first byte YAML rejects (invalid
// UTF-8 or a control character), or -1.
func firstUnreadable(data []byte) int {
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && size <= 1 {
			return i
		}
		if r < 0x20 && r != '\t' && r != '\n' && r != '\r' || r == 0x7f {
			return i
		}
		i += size
	}
	return -1
}

func lineCount(data []byte) int {
	return lineAt(data, len(bytes.TrimSuffix(data, []byte("\n"))))
}

func lineAt(data []byte, offset int) int {
	return bytes.Count(data[:offset], []byte("\n")) + 1
}
