package main

import "os/exec"

// partitionSupport says why the nemesis cannot partition a member here
// ("" would mean it can). The test bed runs every member on the host's
// loopback: a member's outgoing connections all leave from 127.0.0.1, not
// from its own 127.0.x.y, so address rules (iptables, nft) can only drop
// traffic towards a member, which rafthttp routes around over the
// connections the member dials itself. Cutting one member off needs
// per-process matching (cgroup rules) or network namespaces for the
// members, which the test bed does not have yet.
func partitionSupport() string {
	_, ipt := exec.LookPath("iptables")
	_, nft := exec.LookPath("nft")
	if ipt != nil && nft != nil {
		return "neither iptables nor nft is installed; besides, the test bed's members share the host's loopback (all their connections leave from 127.0.0.1), so address rules could not cut one member off"
	}
	return "the test bed's members share the host's loopback (all their connections leave from 127.0.0.1), so iptables/nft address rules cannot cut one member off; that needs the members in network namespaces"
}
