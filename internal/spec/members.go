package spec

// Lookup returns the member called name.
func (s *Spec) Lookup(name string) (Member, bool) {
	for _, m := range s.Members {
		if m.Name == name {
			return m, true
		}
	}
	return Member{}, false
}

// Names returns the member names in spec order.
func (s *Spec) Names() []string {
	names := make([]string, len(s.Members))
	for i, m := range s.Members {
		names[i] = m.Name
	}
	return names
}
