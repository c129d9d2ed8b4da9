package spec

import (
	"fmt"
	"time"

	"gopkg.in/yaml.v3"
)

// UnmarshalYAML reads a Go duration such as "2s" or "1m30s".
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := durationOf(n)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*d = v
	return nil
}

// MarshalYAML writes the duration the way UnmarshalYAML reads it.
func (d Duration) MarshalYAML() (any, error) {
	return d.String(), nil
}

func durationOf(n *yaml.Node) (Duration, error) {
	if n.Kind != yaml.ScalarNode {
		return Duration{}, fmt.Errorf("must be a duration such as 2s, found %s", describe(n))
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return Duration{}, fmt.Errorf("%q is not a duration (write e.g. 2s or 1m30s): %w", n.Value, err)
	}
	return Duration{v}, nil
}
