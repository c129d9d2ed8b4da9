package kubeadm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"gopkg.in/yaml.v3"
)

// Manifest is what an etcd static pod says about its host's member: etcd's
// flags, the container's ETCD_* environment and where the container's
// paths are on the host.
type Manifest struct {
	// Source names the manifest in comments and errors, e.g. the file it
	// was read from. ParseManifest leaves it empty.
	Source string
	// Flags are etcd's flags in command-line order, names without dashes.
	Flags []Flag
	// Env holds the names of the container's ETCD_* variables: etcd reads
	// them as flags, but import does not (values may come from secrets).
	Env []string
	// Mounts map container paths to host paths (hostPath volumes only).
	Mounts []Mount
	// Image is the etcd container's image, e.g. registry.k8s.io/etcd:3.6.4-0.
	Image string

	// last indexes Flags by name (the last one of each), so that a
	// manifest with many flags imports in linear time; see indexed.
	last map[string]int
}

// Flag is one etcd command-line flag, name without dashes.
type Flag struct {
	Name, Value string
}

// Mount is a hostPath volume mounted into the etcd container.
type Mount struct {
	ContainerPath, HostPath string
}

// pod is the part of a v1 Pod that import reads. Anything else in the
// manifest (probes, resources, image) has no counterpart in the spec.
type pod struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Spec       struct {
		Containers []container `yaml:"containers"`
		Volumes    []struct {
			Name     string `yaml:"name"`
			HostPath *struct {
				Path string `yaml:"path"`
			} `yaml:"hostPath"`
		} `yaml:"volumes"`
	} `yaml:"spec"`
}

type container struct {
	Name    string   `yaml:"name"`
	Image   string   `yaml:"image"`
	Command []string `yaml:"command"`
	Args    []string `yaml:"args"`
	Env     []struct {
		Name string `yaml:"name"`
	} `yaml:"env"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

// MaxManifestBytes bounds a manifest file: kubeadm's is 2 kB, a
// `kubectl get pod -o yaml` list of a few control-plane hosts some 50 kB.
const MaxManifestBytes = 4 << 20

// ErrEmpty is the error for a file that holds no YAML document, or only null.
var ErrEmpty = errors.New("the file is empty: give kubeadm's etcd static pod, /etc/kubernetes/manifests/etcd.yaml")

// ParseManifest reads one etcd static pod manifest, kubeadm's
// /etc/kubernetes/manifests/etcd.yaml. Data that holds several manifests
// is refused: ParseManifests reads them all.
func ParseManifest(data []byte) (Manifest, error) {
	ms, err := ParseManifests(data, "")
	if err != nil {
		return Manifest{}, err
	}
	if len(ms) != 1 {
		return Manifest{}, fmt.Errorf("%d manifests in one file: read them with ParseManifests", len(ms))
	}
	return ms[0], nil
}

// ParseManifests reads every etcd pod in data: each YAML document is a Pod
// (kubeadm's static pod) or a List of Pods (what `kubectl -n kube-system get
// pod -l component=etcd -o yaml` prints). Every pod must be an etcd pod
// whose flags name its member; anything else is an error, so that no host
// in the file is silently left out. source names the file: each
// manifest's Source is source, with the document's line when the file
// holds more than one, and errors start with source:LINE.
func ParseManifests(data []byte, source string) ([]Manifest, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	type found struct {
		n    *yaml.Node
		line int
	}
	var pods []found
	for {
		var doc yaml.Node
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, at(source, 0, fmt.Errorf("not a pod manifest: %w", err))
		}
		if isEmpty(&doc) {
			continue
		}
		root := doc.Content[0]
		var head struct {
			Kind  string      `yaml:"kind"`
			Items []yaml.Node `yaml:"items"`
		}
		if err := root.Decode(&head); err != nil {
			return nil, at(source, root.Line, fmt.Errorf("not a pod manifest: %w", err))
		}
		switch head.Kind {
		case "List", "PodList":
			for i := range head.Items {
				pods = append(pods, found{&head.Items[i], head.Items[i].Line})
			}
		default:
			pods = append(pods, found{root, root.Line})
		}
	}
	if len(pods) == 0 {
		return nil, at(source, 0, ErrEmpty)
	}
	ms := make([]Manifest, 0, len(pods))
	for _, p := range pods {
		m, err := parsePod(p.n)
		if err != nil {
			return nil, at(source, p.line, err)
		}
		m.Source = source
		if len(pods) > 1 && source != "" {
			m.Source = fmt.Sprintf("%s:%d", source, p.line)
		}
		ms = append(ms, m)
	}
	return ms, nil
}

// at puts source:line (or source alone) before err.
func at(source string, line int, err error) error {
	switch {
	case source == "":
		return err
	case line == 0:
		return fmt.Errorf("%s: %w", source, err)
	}
	return fmt.Errorf("%s:%d: %w", source, line, err)
}

// parsePod reads one Pod: it fails unless it has an etcd container whose
// flags name the member.
func parsePod(n *yaml.Node) (Manifest, error) {
	var p pod
	if err := n.Decode(&p); err != nil {
		return Manifest{}, fmt.Errorf("not a pod manifest: %w", err)
	}
	if p.Kind != "Pod" {
		return Manifest{}, fmt.Errorf("kind is %q, want Pod (or a List of them): give kubeadm's etcd static pod, /etc/kubernetes/manifests/etcd.yaml", p.Kind)
	}
	c, err := etcdContainer(p.Spec.Containers)
	if err != nil {
		return Manifest{}, err
	}
	flags, err := parseArgs(commandLine(c))
	if err != nil {
		return Manifest{}, fmt.Errorf("container %s: %w", c.Name, err)
	}
	m := Manifest{Flags: flags, Image: c.Image}
	if v, _ := m.Flag("name"); v == "" {
		return Manifest{}, fmt.Errorf("container %s: no --name: import needs the member's name", c.Name)
	}
	for _, e := range c.Env {
		if strings.HasPrefix(e.Name, "ETCD_") {
			m.Env = append(m.Env, e.Name)
		}
	}
	hostPaths := map[string]string{}
	for _, v := range p.Spec.Volumes {
		if v.HostPath != nil {
			hostPaths[v.Name] = path.Clean(v.HostPath.Path)
		}
	}
	for _, vm := range c.VolumeMounts {
		if hp, ok := hostPaths[vm.Name]; ok {
			m.Mounts = append(m.Mounts, Mount{ContainerPath: path.Clean(vm.MountPath), HostPath: hp})
		}
	}
	return m, nil
}

// isEmpty: no document, or a document that is null.
func isEmpty(n *yaml.Node) bool {
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	return n.Kind == 0 || n.Kind == yaml.DocumentNode || n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

// etcdContainer is the container named etcd (kubeadm's name), or else the
// only one that runs an etcd binary.
func etcdContainer(cs []container) (container, error) {
	var found []container
	for _, c := range cs {
		if c.Name == "etcd" {
			return c, nil
		}
		if cl := commandLine(c); len(cl) > 0 && path.Base(cl[0]) == "etcd" {
			found = append(found, c)
		}
	}
	switch len(found) {
	case 0:
		return container{}, errors.New("no etcd container (named etcd or running etcd) in the pod")
	case 1:
		return found[0], nil
	}
	return container{}, fmt.Errorf("%d containers run etcd: expected one", len(found))
}

// commandLine is the container's command followed by its args, the way the
// runtime starts it. kubeadm puts everything in command, starting with etcd.
func commandLine(c container) []string {
	return append(append([]string{}, c.Command...), c.Args...)
}

// parseArgs reads etcd's flags the way etcd's flag package does: --name=value,
// --name value, or --name alone for true. The program name, when present, is
// skipped.
func parseArgs(args []string) ([]Flag, error) {
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		args = args[1:]
	}
	var flags []Flag
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || strings.Trim(a, "-") == "" {
			return nil, fmt.Errorf("argument %q is not a flag: etcd takes only flags", a)
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !hasValue {
			value = "true"
			if i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				value = args[i+1]
				i++
			}
		}
		flags = append(flags, Flag{Name: name, Value: value})
	}
	return flags, nil
}

// Flag returns the value of flag name. etcd, like Go's flag package, takes
// the last one when a flag is given twice.
func (m Manifest) Flag(name string) (string, bool) {
	if m.last != nil {
		i, ok := m.last[name]
		if !ok {
			return "", false
		}
		return m.Flags[i].Value, true
	}
	value, found := "", false
	for _, f := range m.Flags {
		if f.Name == name {
			value, found = f.Value, true
		}
	}
	return value, found
}

// indexed is m with its flags indexed by name: Flag then takes constant
// time. ToSpec looks flags up by name for every flag of every manifest.
func (m Manifest) indexed() Manifest {
	m.last = make(map[string]int, len(m.Flags))
	for i, f := range m.Flags {
		m.last[f.Name] = i
	}
	return m
}

// Name is the member's name, etcd's --name.
func (m Manifest) Name() string {
	v, _ := m.Flag("name")
	return v
}

// HostPath maps a path seen inside the container to the host, through the
// hostPath volume mounted deepest above it. ok is false when no volume
// covers it: the file then lives in the container image.
func (m Manifest) HostPath(p string) (hostPath string, ok bool) {
	p = path.Clean(p)
	best := -1
	for i, mt := range m.Mounts {
		if within(p, mt.ContainerPath) && (best < 0 || len(mt.ContainerPath) > len(m.Mounts[best].ContainerPath)) {
			best = i
		}
	}
	if best < 0 {
		return p, false
	}
	mt := m.Mounts[best]
	return path.Join(mt.HostPath, strings.TrimPrefix(p, mt.ContainerPath)), true
}

func within(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

// label names the manifest in comments: "cp1 (testdata/cp1.yaml)".
func (m Manifest) label() string {
	if m.Source == "" {
		return m.Name() + "'s manifest"
	}
	return m.Name() + "'s manifest " + m.Source
}
