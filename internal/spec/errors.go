package spec

import (
	"fmt"
	"sort"
	"strings"
)

// Error is one problem in a spec file. Msg names the field, says what is
// wrong and what to do.
type Error struct {
	File string
	Line int
	Msg  string
	// Expired marks a warning about a certificate that is not valid now
	// (expired, or not yet valid). The agent still loads the spec, runs
	// and reports it (the expiry metric, status): refusing to start would
	// only take the member down; validate and import refuse it.
	Expired bool
}

func (e Error) Error() string {
	return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
}

// Errors is every problem found in one spec file, in line order. Load and
// Parse return it as *Errors so that an operator fixes the file in one pass
// instead of one error per run.
type Errors []Error

// Error prints one problem per line as FILE:LINE: message.
func (e *Errors) Error() string {
	lines := make([]string, len(*e))
	for i, err := range *e {
		lines[i] = err.Error()
	}
	return strings.Join(lines, "\n")
}

func (e Errors) sortByLine() {
	sort.SliceStable(e, func(i, j int) bool { return e[i].Line < e[j].Line })
}
