package plan

import "container/heap"

// AssignGroups is paper Algorithm 3: it puts items, in order, each into the task group with the
// least requested so far (lowest index on ties), and returns every item's group. With equal
// requests this deals items round-robin; larger items first would balance better, so callers
// pass them in the order they want them considered.
func AssignGroups(requests []int64, groups int) []int {
	out := make([]int, len(requests))
	if groups < 1 {
		return out
	}
	h := make(groupHeap, groups)
	for i := range h {
		h[i] = groupLoad{index: i}
	}
	for i, r := range requests {
		out[i] = h[0].index
		h[0].load += r
		heap.Fix(&h, 0)
	}
	return out
}

type groupLoad struct {
	load  int64
	index int
}

type groupHeap []groupLoad

func (h groupHeap) Len() int { return len(h) }
func (h groupHeap) Less(i, j int) bool {
	if h[i].load != h[j].load {
		return h[i].load < h[j].load
	}
	return h[i].index < h[j].index
}
func (h groupHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *groupHeap) Push(x any)   { *h = append(*h, x.(groupLoad)) }
func (h *groupHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
