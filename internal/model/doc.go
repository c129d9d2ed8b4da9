// Package model is what the agent observed, as plain data: the live
// cluster (members, their health and raft progress, alarms), the agents'
// records, and the local data dir. Package cluster fills it; the pure
// decisions in package reconcile, the agent, the status and plan commands
// and the tests read it. It imports no client: a decision that needs
// grpc is doing I/O.
//
// The rules that every reader must agree on live here, once: when a
// member counts as healthy, when a voter counts as caught up for a
// voluntary stop or removal, and how many voters make a quorum.
package model
