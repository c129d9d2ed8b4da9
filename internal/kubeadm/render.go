package kubeadm

import (
	"bytes"
	"io"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

// width is where comments wrap, like the hand-written examples/cluster.yaml.
const width = 78

// Render writes d as a spec file: the YAML keys spec.Parse reads, with the
// notes as comments next to the values they explain.
func Render(w io.Writer, d Document) error {
	r := &renderer{}
	r.header(d)
	r.cluster(d)
	r.members(d)
	r.etcd(d)
	r.tls(d.TLS, d.AgentNote)
	_, err := w.Write(r.buf.Bytes())
	return err
}

type renderer struct {
	buf bytes.Buffer
}

func (r *renderer) line(indent int, s string) {
	r.buf.WriteString(strings.Repeat(" ", indent))
	r.buf.WriteString(s)
	r.buf.WriteByte('\n')
}

// comment writes text as # lines wrapped at width. Each line of text is a
// paragraph; one that starts with two spaces (a command) is kept as it is,
// and one that starts with "- " is a bullet whose next lines hang under it.
func (r *renderer) comment(indent int, text string) {
	for _, para := range strings.Split(text, "\n") {
		if strings.HasPrefix(para, "  ") {
			r.line(indent, "# "+para)
			continue
		}
		r.paragraph(indent, para)
	}
}

func (r *renderer) paragraph(indent int, text string) {
	if text == "" {
		return
	}
	prefix, rest := "# ", "# "
	if strings.HasPrefix(text, "- ") {
		rest = "#   "
	}
	cur := ""
	for _, word := range strings.Fields(text) {
		if cur != "" && indent+len(prefix)+len(cur)+1+len(word) > width {
			r.line(indent, prefix+cur)
			prefix, cur = rest, ""
		}
		if cur != "" {
			cur += " "
		}
		cur += word
	}
	r.line(indent, prefix+cur)
}

func (r *renderer) header(d Document) {
	r.comment(0, "etcdkeeper spec imported by `etcdkeeper import kubeadm` from the etcd static pods of a kubeadm control plane:")
	for _, s := range d.Sources {
		r.line(0, "#   "+s)
	}
	r.comment(0, "examples/cluster.yaml documents every field.")
	r.line(0, "#")
	r.comment(0, "Before any agent runs this file:")
	for _, w := range d.Warnings {
		r.comment(0, "- "+w)
	}
	r.comment(0, "Then put this same file on every host (/etc/etcdkeeper/cluster.yaml) and move the hosts "+
		"to etcdkeeper one at a time: docs/kubeadm.md.")
	r.line(0, "")
}

func (r *renderer) cluster(d Document) {
	r.line(0, "cluster:")
	r.comment(2, d.ClusterNote)
	r.line(2, "name: "+scalar(d.ClusterName))
	r.line(0, "")
}

func (r *renderer) members(d Document) {
	r.line(0, "members:")
	for _, m := range d.Members {
		r.comment(2, m.Note)
		r.line(2, "- name: "+scalar(m.Name))
		r.list(4, "peerURLs", m.PeerURLs)
		r.list(4, "clientURLs", m.ClientURLs)
		r.list(4, "listenPeerURLs", m.ListenPeerURLs)
		r.list(4, "listenClientURLs", m.ListenClientURLs)
		if m.DataDir != "" {
			r.line(4, "dataDir: "+scalar(m.DataDir))
		}
		if len(m.Flags) > 0 {
			r.line(4, "flags:")
			r.flags(6, m.Flags)
		}
	}
	r.line(0, "")
}

// flags writes flag: value lines, each after its note.
func (r *renderer) flags(indent int, flags []NotedFlag) {
	for _, f := range flags {
		r.comment(indent, f.Note)
		r.line(indent, scalar(f.Name)+": "+scalar(f.Value))
	}
}

// list writes a flow list, [a, b], like examples/cluster.yaml; nothing for
// an empty one, which the spec then derives.
func (r *renderer) list(indent int, key string, items []string) {
	if len(items) == 0 {
		return
	}
	quoted := make([]string, len(items))
	for i, it := range items {
		quoted[i] = flowScalar(it)
	}
	r.line(indent, key+": ["+strings.Join(quoted, ", ")+"]")
}

func (r *renderer) etcd(d Document) {
	r.line(0, "etcd:")
	r.comment(2, d.DataDirNote)
	r.line(2, "dataDir: "+scalar(d.DataDir))
	if len(d.Flags) == 0 {
		r.line(2, "flags: {}")
	} else {
		r.line(2, "flags:")
	}
	r.flags(4, d.Flags)
	if len(d.Dropped) > 0 {
		r.comment(2, "Not carried over from the manifests:")
		for _, why := range d.Dropped {
			r.comment(2, "- "+why)
		}
	}
	r.line(0, "")
}

func (r *renderer) tls(t spec.TLS, agentNote string) {
	if t.Client == (spec.TLSServer{}) && t.Peer == (spec.TLSServer{}) && t.Agent == (spec.TLSClient{}) && t.CA == (spec.TLSCA{}) {
		return
	}
	r.line(0, "tls:")
	r.tlsServer("client", t.Client)
	r.tlsServer("peer", t.Peer)
	if t.Agent != (spec.TLSClient{}) {
		r.comment(2, agentNote)
		r.line(2, "agent:")
		r.field("certFile", t.Agent.CertFile)
		r.field("keyFile", t.Agent.KeyFile)
		r.field("trustedCAFile", t.Agent.TrustedCAFile)
	}
	if t.CA != (spec.TLSCA{}) {
		r.comment(2, "The etcd CA: with its key on a host, that host's agent renews the certificates "+
			"above and under renew: before they expire, as kubeadm did while etcd was its own "+
			"(docs/certificates.md). kube-apiserver picks up its renewed client certificate at "+
			"its next connection to etcd, without a restart.")
		r.line(2, "ca:")
		r.field("certFile", t.CA.CertFile)
		r.field("keyFile", t.CA.KeyFile)
	}
	if len(t.Renew.Others) > 0 {
		r.line(2, "renew:")
		r.line(4, "others:")
		for _, o := range t.Renew.Others {
			r.line(6, "- name: "+scalar(o.Name))
			r.line(8, "certFile: "+scalar(o.CertFile))
			r.line(8, "keyFile: "+scalar(o.KeyFile))
		}
	}
}

func (r *renderer) tlsServer(side string, s spec.TLSServer) {
	if s == (spec.TLSServer{}) {
		return
	}
	r.line(2, side+":")
	r.field("certFile", s.CertFile)
	r.field("keyFile", s.KeyFile)
	r.field("trustedCAFile", s.TrustedCAFile)
	r.line(4, "clientCertAuth: "+strconv.FormatBool(s.ClientCertAuth))
}

func (r *renderer) field(key, value string) {
	if value != "" {
		r.line(4, key+": "+scalar(value))
	}
}

// scalar writes v plain when YAML reads it back as the same non-null text
// (the spec takes 10000 and true in etcd.flags as written), quoted
// otherwise.
func scalar(v string) string {
	if readsBack(v, v) {
		return v
	}
	return strconv.Quote(v)
}

// flowScalar is scalar inside [ ]: commas and brackets end a plain item.
func flowScalar(v string) string {
	if readsBack("["+v+"]", v) {
		return v
	}
	return strconv.Quote(v)
}

// readsBack reports whether doc, a value or a one-item flow list, parses
// to the single plain scalar want.
func readsBack(doc, want string) bool {
	if want == "" || strings.ContainsAny(want, "\n\r\t") {
		return false
	}
	var n yaml.Node
	if err := yaml.Unmarshal([]byte("k: "+doc+"\n"), &n); err != nil || len(n.Content) != 1 {
		return false
	}
	m := n.Content[0]
	if m.Kind != yaml.MappingNode || len(m.Content) != 2 {
		return false
	}
	v := m.Content[1]
	if v.Kind == yaml.SequenceNode {
		if len(v.Content) != 1 {
			return false
		}
		v = v.Content[0]
	}
	return v.Kind == yaml.ScalarNode && v.Style == 0 && v.Tag != "!!null" && v.Value == want
}
