// Package nrt owns finegrain's side of the NodeResourceTopology API (topology.node.k8s.io
// v1alpha2): the object's wire types, the attribute names docs/interfaces.md fixes (declared
// here and nowhere else), the encoding of the per-zone pins attribute and its readers (strict,
// ParsePins, and entry by entry, ScanPins), the placer's allocation-free reader of an
// unstructured object's free-core map (ReadFreeCoreMap), conversion from and to unstructured
// objects for the dynamic client, and the pods fingerprint scheduler-plugins compares against.
// It is pure: it must not talk to the API server, read the host or decide allocations.
package nrt
