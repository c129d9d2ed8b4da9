package kubeadm

import "testing"

func TestScalar(t *testing.T) {
	tests := []struct{ in, block, flow string }{
		{"10000", "10000", "10000"},
		{"true", "true", "true"},
		{"5s", "5s", "5s"},
		{"http://127.0.0.1:2381,http://10.0.0.11:2381", "http://127.0.0.1:2381,http://10.0.0.11:2381", `"http://127.0.0.1:2381,http://10.0.0.11:2381"`},
		{"/var/lib/etcd/{name}", "/var/lib/etcd/{name}", `"/var/lib/etcd/{name}"`},
		{"", `""`, `""`},
		{"null", `"null"`, `"null"`},
		{"~", `"~"`, `"~"`},
		{"a: b", `"a: b"`, `"a: b"`},
		{"#x", `"#x"`, `"#x"`},
		{"*", `"*"`, `"*"`},
		{`say "hi"`, `say "hi"`, `say "hi"`},
		{"- x", `"- x"`, `"- x"`},
	}
	for _, tc := range tests {
		if got := scalar(tc.in); got != tc.block {
			t.Errorf("scalar(%q) = %s, want %s", tc.in, got, tc.block)
		}
		if got := flowScalar(tc.in); got != tc.flow {
			t.Errorf("flowScalar(%q) = %s, want %s", tc.in, got, tc.flow)
		}
	}
}
