package inspect

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/finegrain-dev/finegrain/pkg/cpulist"
)

// Processes is what runs in the pinned containers of one node, read by its agent from the
// containers' cgroups and /proc: the JSON form of GET /processes and of `nodeagent pins
// --processes -o json`, a public contract (docs/interfaces.md). CPU lists are in kernel list
// format.
type Processes struct {
	Node string `json:"node,omitempty"`
	// PerContainer and PerListing are the most processes the agent reads in one container and
	// in one listing.
	PerContainer int                  `json:"perContainer"`
	PerListing   int                  `json:"perListing"`
	Containers   []ContainerProcesses `json:"containers"`
}

// ContainerProcesses is one pinned container's cgroup and what runs in it.
type ContainerProcesses struct {
	Namespace string `json:"namespace,omitempty"`
	Pod       string `json:"pod,omitempty"`
	PodUID    string `json:"podUID"`
	Container string `json:"container"`
	// ContainerID is the runtime's ID of the container whose cgroup was read.
	ContainerID string `json:"containerID"`
	// CPUs, Mems and NUMANode are the container's exclusive pin; Written is false until the
	// agent has written it to the cgroup.
	CPUs     string `json:"cpus"`
	Mems     string `json:"mems"`
	NUMANode int    `json:"numaNode"`
	Written  bool   `json:"written"`
	// Listed is how many processes the container's cgroups held; Processes are the lowest PIDs
	// among them (at most PerContainer) that still ran when read, in PID order.
	Listed    int       `json:"listed"`
	Processes []Process `json:"processes"`
	// Error says why the processes could not be listed.
	Error string `json:"error,omitempty"`
}

// PodLabel names the container's pod for people, like Container.PodLabel.
func (c ContainerProcesses) PodLabel() string {
	return Container{Namespace: c.Namespace, Pod: c.Pod, PodUID: c.PodUID}.PodLabel()
}

// Process is one process of a pinned container, in the host's PID namespace.
type Process struct {
	PID int `json:"pid"`
	// Command is the kernel's name of the process (comm); the process itself can set it.
	Command string `json:"command"`
	// Cgroup is the sub-cgroup below the container's that holds it, empty for the container's.
	Cgroup string `json:"cgroup,omitempty"`
	// Rank is the MPI rank of a process whose environment names one in RankVariable
	// (OMPI_COMM_WORLD_RANK, PMIX_RANK or PMI_RANK); absent for other processes.
	Rank         *int   `json:"rank,omitempty"`
	RankVariable string `json:"rankVariable,omitempty"`
	// CPUs and Mems are the process's Cpus_allowed_list and Mems_allowed_list.
	CPUs string `json:"cpus"`
	Mems string `json:"mems"`
	// Problem says what could not be read about the process, such as its environment.
	Problem string `json:"problem,omitempty"`
}

// DecodeProcesses reads the JSON form of a Processes view; from names where it came from.
func DecodeProcesses(data []byte, from string) (Processes, error) {
	var v Processes
	if err := json.Unmarshal(data, &v); err != nil {
		return Processes{}, fmt.Errorf("processes from %s are not a finegrain processes view: %w", from, err)
	}
	if v.PerContainer == 0 || v.Containers == nil {
		return Processes{}, fmt.Errorf("processes from %s have no perContainer or containers field; is it a finegrain node agent?", from)
	}
	return v, nil
}

// ParsePodName reads a pod named as namespace/name, as /processes' pod parameter and
// `--pod` take it.
func ParsePodName(s string) (types.NamespacedName, error) {
	ns, name, ok := strings.Cut(s, "/")
	if !ok {
		return types.NamespacedName{}, fmt.Errorf("pod %q: want namespace/name", s)
	}
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return types.NamespacedName{}, fmt.Errorf("pod %q: namespace: %s", s, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return types.NamespacedName{}, fmt.Errorf("pod %q: name: %s", s, strings.Join(errs, "; "))
	}
	return types.NamespacedName{Namespace: ns, Name: name}, nil
}

// WriteProcessesTable prints one line per process of the given containers: the pod and
// container, the pin, then the process's PID, MPI rank, name, allowed CPUs and memory nodes,
// and a note where the process may run outside the pin or something could not be read. A
// container with more processes than were read ends with a line counting the rest.
func WriteProcessesTable(w io.Writer, containers []ContainerProcesses) error {
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 4, 2, ' ', 0)
	var notes footnotes
	fmt.Fprintln(tw, "POD\tCONTAINER\tPINNED CPUS\tPID\tRANK\tCOMMAND\tCPUS ALLOWED\tMEMORY NODES\tNOTE")
	for _, c := range containers {
		lead := fmt.Sprintf("%s\t%s\t%s", c.PodLabel(), c.Container, cpusOrNone(c.CPUs))
		if !c.Written {
			lead += " (not written yet)"
		}
		if c.Error != "" {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t-\tnot listed: %s\n", lead, printable(c.Error))
			continue
		}
		if len(c.Processes) == 0 && c.Listed == 0 {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t-\tno processes\n", lead)
		}
		for _, p := range c.Processes {
			rank := "-"
			if p.Rank != nil {
				rank = strconv.Itoa(*p.Rank)
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\n", lead, p.PID, rank, printable(p.Command), p.CPUs, p.Mems, processNote(c, p, &notes))
		}
		if rest := c.Listed - len(c.Processes); rest > 0 {
			fmt.Fprintf(tw, "%s\t...\t\t\t\t\t%d more processes not shown (exited while read, or past the bound per container)\n", lead, rest)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// Lines whose last columns are empty would end in padding.
	bw := bufio.NewWriter(w)
	for line := range strings.Lines(buf.String()) {
		bw.WriteString(strings.TrimRight(line, " \n"))
		bw.WriteByte('\n')
	}
	for i, n := range notes {
		fmt.Fprintf(bw, "[%d] %s\n", i+1, n)
	}
	return bw.Flush()
}

// footnotes are the problems of a table, each printed once below it and referred to by number
// (the same problem, such as an unreadable environment, usually applies to every process).
type footnotes []string

func (f *footnotes) ref(note string) string {
	i := slices.Index(*f, note)
	if i < 0 {
		*f = append(*f, note)
		i = len(*f) - 1
	}
	return "[" + strconv.Itoa(i+1) + "]"
}

// processNote says what a person should notice about one process: CPUs or memory nodes
// outside the container's pin, a sub-cgroup, and a problem (as a footnote reference).
func processNote(c ContainerProcesses, p Process, problems *footnotes) string {
	var notes []string
	if outside(p.CPUs, c.CPUs) {
		notes = append(notes, "CPUs outside the pin")
	}
	if outside(p.Mems, c.Mems) {
		notes = append(notes, "memory nodes outside the pin")
	}
	if p.Cgroup != "" {
		notes = append(notes, "in sub-cgroup "+printable(p.Cgroup))
	}
	if p.Problem != "" {
		notes = append(notes, problems.ref(printable(p.Problem)))
	}
	return strings.Join(notes, "; ")
}

// outside reports whether CPU list have holds anything outside CPU list pin; lists that do not
// parse count as outside.
func outside(have, pin string) bool {
	h, err := cpulist.Parse(have)
	if err != nil {
		return true
	}
	p, err := cpulist.Parse(pin)
	return err != nil || !h.IsSubsetOf(p)
}

// printable replaces control characters and invalid UTF-8 with '?', so that names a process
// chose cannot drive the terminal.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			return '?'
		}
		return r
	}, s)
}
