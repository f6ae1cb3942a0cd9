// Package clusterconf owns the configuration finegrain generates for a virtual cluster's Slurm
// (docs/slurm.md): slurm.conf, cgroup.conf, the initial job_submit.lua and the ssh client
// configuration of a VirtualCluster (Generate, pure: it receives the nodes and ports and returns
// text), and the reader of the `sinfo --json` node states the controller reports. It never talks
// to the API server or runs Slurm; pkg/placer/vcluster does.
package clusterconf
