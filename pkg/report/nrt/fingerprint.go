package nrt

import (
	"encoding/binary"
	"encoding/hex"
	"slices"

	"github.com/cespare/xxhash/v2"
)

// FingerprintPrefix starts every fingerprint: "pfp0" then the algorithm version "v001".
const FingerprintPrefix = "pfp0v001"

// PodName identifies a pod the way the fingerprint does: by namespace and name only.
type PodName struct {
	Namespace, Name string
}

// PodsFingerprint computes the pod-set fingerprint that scheduler-plugins' NodeResourceTopology
// cache and node-feature-discovery's topology-updater compare (the podfingerprint algorithm,
// version v001), so a reader can tell whether an object already accounts for the pods it has
// bound to the node:
//
//  1. each pod hashes to XXH64(name, seed = XXH64(namespace, seed 0));
//  2. the pod hashes are sorted as unsigned integers, so the order of pods does not matter;
//  3. the sorted hashes, each as 8 little-endian bytes, are hashed with XXH64 (seed 0);
//  4. the result is "pfp0v001" followed by that 64-bit sum as 16 lowercase hex digits
//     (most significant byte first).
//
// A pod listed twice counts once. The empty set yields "pfp0v001ef46db3751d8e999", XXH64 of no
// input.
func PodsFingerprint(pods []PodName) string {
	hashes := make([]uint64, 0, len(pods))
	seeded := xxhash.NewWithSeed(0)
	for _, p := range pods {
		seeded.ResetWithSeed(xxhash.Sum64String(p.Namespace))
		_, _ = seeded.WriteString(p.Name)
		hashes = append(hashes, seeded.Sum64())
	}
	slices.Sort(hashes)
	hashes = slices.Compact(hashes)
	sum := xxhash.New()
	var b [8]byte
	for _, h := range hashes {
		binary.LittleEndian.PutUint64(b[:], h)
		_, _ = sum.Write(b[:])
	}
	return FingerprintPrefix + hex.EncodeToString(sum.Sum(nil))
}
