// Package report publishes the node agent's free-core map: from a read-only Snapshot of the
// agent's state it builds the node's NodeResourceTopology object (Build, pure) and keeps it
// current on the API server (Publisher: server-side apply through the dynamic client with field
// manager finegrain-nodeagent and an ownerReference to the Node, from its own goroutine, which
// coalesces change notifications and retries with back-off). It must not change the agent's
// state, block the agent (it only reads its Snapshot and Changed channel), or write any object
// other than the node's NodeResourceTopology.
package report
