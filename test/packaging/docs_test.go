package packaging

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The manual's pages: the README points into docs/, the pages into each
// other, the code and the packaging. A moved page or a renamed heading
// breaks links nobody clicks until an operator needs them.
var manualPages = []string{"README.md", "docs/*.md", "packaging/README.md"}

var (
	linkRE       = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	inlineCodeRE = regexp.MustCompile("`[^`]*`")
	headingRE    = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
)

// TestManualLinks: every relative link in the manual names a file or
// directory of the repository, and every #anchor a heading of its page.
func TestManualLinks(t *testing.T) {
	root := repoRoot(t)
	var pages []string
	for _, g := range manualPages {
		m, err := filepath.Glob(filepath.Join(root, g))
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, m...)
	}
	if len(pages) < 3 {
		t.Fatalf("found only %d pages of the manual (%v): is the checkout complete?", len(pages), pages)
	}
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) (map[string]bool, error) {
		if a, ok := anchors[path]; ok {
			return a, nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		a := headingAnchors(string(b))
		anchors[path] = a
		return a, nil
	}
	links := 0
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, page)
		for _, l := range pageLinks(string(b)) {
			links++
			if err := checkLink(page, l.target, anchorsOf); err != nil {
				t.Errorf("%s:%d: link %s: %v", rel, l.line, l.target, err)
			}
		}
	}
	if links < 50 {
		t.Errorf("only %d links in %d pages: is the link pattern still right?", links, len(pages))
	}
}

type link struct {
	line   int
	target string
}

// pageLinks are the relative links of a markdown page, outside code.
func pageLinks(text string) []link {
	var out []link
	inFence := false
	for i, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		for _, m := range linkRE.FindAllStringSubmatch(inlineCodeRE.ReplaceAllString(line, ""), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			out = append(out, link{i + 1, target})
		}
	}
	return out
}

func checkLink(page, target string, anchorsOf func(string) (map[string]bool, error)) error {
	path, anchor, _ := strings.Cut(target, "#")
	file := page
	if path != "" {
		file = filepath.Join(filepath.Dir(page), path)
		if _, err := os.Stat(file); err != nil {
			return fmt.Errorf("no such file: %w", err)
		}
	}
	if anchor == "" {
		return nil
	}
	if !strings.HasSuffix(file, ".md") {
		return fmt.Errorf("an anchor into %s, which is not a markdown page", path)
	}
	a, err := anchorsOf(file)
	if err != nil {
		return err
	}
	if !a[anchor] {
		return fmt.Errorf("no heading with anchor #%s in %s", anchor, filepath.Base(file))
	}
	return nil
}

// headingAnchors are the anchors GitHub gives a page's headings.
func headingAnchors(text string) map[string]bool {
	out := map[string]bool{}
	inFence := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inFence = !inFence
			continue
		}
		if m := headingRE.FindStringSubmatch(line); m != nil && !inFence {
			a := anchor(m[1])
			for n := 1; out[a]; n++ { // a repeated heading gets -1, -2, ...
				a = fmt.Sprintf("%s-%d", anchor(m[1]), n)
			}
			out[a] = true
		}
	}
	return out
}

// anchor is GitHub's anchor of a heading: lower case, markup and
// punctuation dropped, spaces made hyphens.
func anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestAnchor(t *testing.T) {
	for _, tc := range []struct{ heading, want string }{
		{"Add a host", "add-a-host"},
		{"1. Look first", "1-look-first"},
		{"The source's answer", "the-sources-answer"},
		{"End-to-end test bed (real systemd hosts)", "end-to-end-test-bed-real-systemd-hosts"},
		{"Compared with k3s, Talos and kubeadm", "compared-with-k3s-talos-and-kubeadm"},
		{"The `Status:` line", "the-status-line"},
		{"snake_case stays", "snake_case-stays"},
	} {
		if got := anchor(tc.heading); got != tc.want {
			t.Errorf("anchor(%q) = %q, want %q", tc.heading, got, tc.want)
		}
	}
	got := headingAnchors("# A\n## B\n```\n# not a heading\n```\n## B\n")
	for _, want := range []string{"a", "b", "b-1"} {
		if !got[want] {
			t.Errorf("headingAnchors: no %q in %v", want, got)
		}
	}
	if got["not-a-heading"] {
		t.Errorf("headingAnchors took a line of a code block: %v", got)
	}
}

// TestTroubleshootingNamesEveryWait: every wait the decisions can produce
// (reconcile's wait, startWait and waitStep calls) appears in
// docs/troubleshooting.md, by the longest literal part of its message.
func TestTroubleshootingNamesEveryWait(t *testing.T) {
	root := repoRoot(t)
	page, err := os.ReadFile(filepath.Join(root, "docs", "troubleshooting.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.Join(strings.Fields(string(page)), " ")
	waits := reconcileWaits(t, filepath.Join(root, "internal", "reconcile"))
	if len(waits) < 30 {
		t.Fatalf("found only %d waits in internal/reconcile: are wait, startWait and waitStep still their names?", len(waits))
	}
	for _, w := range waits {
		if !strings.Contains(doc, w.text) {
			t.Errorf("%s: %q is not in docs/troubleshooting.md: say what it means and what to do", w.pos, w.text)
		}
	}
}

type waitText struct{ pos, text string }

// reconcileWaits parses the non-test Go files of dir and returns, for each
// call of wait, startWait or waitStep, the longest literal part of its
// message (the text between format verbs).
func reconcileWaits(t *testing.T, dir string) []waitText {
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var out []waitText
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			id, ok := call.Fun.(*ast.Ident)
			if !ok || len(call.Args) == 0 {
				return true
			}
			var msg ast.Expr
			switch id.Name {
			case "wait":
				if len(call.Args) < 2 {
					return true
				}
				msg = call.Args[1]
			case "startWait", "waitStep":
				msg = call.Args[0]
				if inner, ok := msg.(*ast.CallExpr); ok && len(inner.Args) > 0 { // waitStep(fmt.Sprintf(...))
					msg = inner.Args[0]
				}
			default:
				return true
			}
			if text := longestLiteral(literalOf(msg)); text != "" {
				out = append(out, waitText{fset.Position(call.Pos()).String(), text})
			}
			return true
		})
	}
	return out
}

// literalOf is the string a message expression spells out: a literal, or
// literals joined with +, each other operand a verb.
func literalOf(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.BasicLit:
		if s, err := strconv.Unquote(e.Value); err == nil {
			return s
		}
	case *ast.BinaryExpr:
		return literalOf(e.X) + literalOf(e.Y)
	}
	return "%v"
}

var verbRE = regexp.MustCompile(`%[-+# 0-9.]*[a-zA-Z]`)

func longestLiteral(format string) string {
	best := ""
	for _, part := range verbRE.Split(format, -1) {
		part = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(part), "waiting:"))
		part = strings.Trim(part, " ;:,()")
		if len(part) > len(best) {
			best = part
		}
	}
	return best
}
