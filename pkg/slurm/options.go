package slurm

import (
	"fmt"
	"strings"
)

// Options are what a job asked of its placement in its comment (sbatch --comment
// "finegrain.placement=most-loaded finegrain.exclusive=false"), as job_submit.lua checked them and
// recorded them in its admin comment ("finegrain placement=most-loaded exclusive=false"), which
// only an administrator can change after submission.
type Options struct {
	// Placement is "least-loaded", "most-loaded", or "" when the job did not say.
	Placement string
	// Exclusive is whether the job wants its nodes to itself; nil when it did not say.
	Exclusive *bool
}

// optionsWord starts every admin comment job_submit.lua writes.
const optionsWord = "finegrain"

// Delegated reports whether finegrain's job_submit.lua saw the job at submission (it writes
// the admin comment of every job): only such jobs are the bridge's to place. A job submitted to
// a Slurm without the script, or before it was in place, is left to Slurm.
func (j Job) Delegated() bool {
	words := strings.Fields(j.AdminComment)
	return len(words) > 0 && words[0] == optionsWord
}

// Options reads the job's options from its admin comment. A job without finegrain's admin
// comment (submitted before the script was in place) has none; a malformed one is an error
// naming the job and the word.
func (j Job) Options() (Options, error) {
	words := strings.Fields(j.AdminComment)
	if len(words) == 0 || words[0] != optionsWord {
		return Options{}, nil
	}
	var o Options
	for _, w := range words[1:] {
		key, value, _ := strings.Cut(w, "=")
		switch {
		case key == "placement" && (value == "least-loaded" || value == "most-loaded"):
			o.Placement = value
		case key == "exclusive" && (value == "true" || value == "false"):
			b := value == "true"
			o.Exclusive = &b
		default:
			return Options{}, fmt.Errorf("Slurm job %s: its admin comment %q has %q, which is not placement=least-loaded|most-loaded or exclusive=true|false: correct it with scontrol update JobId=%s AdminComment=...",
				j.ID, j.AdminComment, w, j.ID)
		}
	}
	return o, nil
}
