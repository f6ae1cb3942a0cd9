package clusterconf

import (
	"encoding/json"
	"fmt"
	"strings"
)

// sinfoOutput is the part of `sinfo --json` (Slurm 22.05's data_parser 0.0.38) the controller
// reads.
type sinfoOutput struct {
	Nodes []struct {
		Name       string   `json:"name"`
		State      string   `json:"state"`
		StateFlags []string `json:"state_flags"`
	} `json:"nodes"`
	Errors []slurmError `json:"errors"`
}

type slurmError struct {
	Error       string `json:"error"`
	Description string `json:"description"`
	ErrorNumber int    `json:"error_number"`
}

func (e slurmError) String() string {
	return strings.TrimSpace(fmt.Sprintf("%s %s (error %d)", e.Error, e.Description, e.ErrorNumber))
}

// ParseNodeStates reads `sinfo --json`: each node's state as sinfo prints it, upper case with its
// flags after '+' (IDLE, MIXED, IDLE+DRAIN, DOWN+NOT_RESPONDING).
func ParseNodeStates(data []byte) (map[string]string, error) {
	var out sinfoOutput
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("read sinfo --json output: %w", err)
	}
	if err := errorsOf("sinfo", out.Errors); err != nil {
		return nil, err
	}
	states := make(map[string]string, len(out.Nodes))
	for _, n := range out.Nodes {
		if n.Name == "" {
			return nil, fmt.Errorf("read sinfo --json output: a node without a name")
		}
		states[n.Name] = strings.Join(append([]string{strings.ToUpper(n.State)}, n.StateFlags...), "+")
	}
	return states, nil
}

func errorsOf(command string, errs []slurmError) error {
	if len(errs) == 0 {
		return nil
	}
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.String()
	}
	return fmt.Errorf("%s reported: %s", command, strings.Join(msgs, "; "))
}
