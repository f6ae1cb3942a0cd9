package main

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/finegrain-dev/finegrain/internal/hpcc"
	v1alpha1 "github.com/finegrain-dev/finegrain/pkg/apis/finegrain/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// infKey is the ConfigMap key (and the worker's subPath) that holds the HPCC input.
const infKey = "hpccinf.txt"

// infBlock matches the line that opens the ConfigMap's hpccinf.txt literal block.
var infBlock = regexp.MustCompile(`^( +)hpccinf\.txt: \|$`)

// document is one YAML document of a multi-document file: its lines [start, end) and its kind.
type document struct {
	start, end int
	kind       string
	data       []byte
}

// exampleFile is a job file split into documents: one HPCJob and one ConfigMap with hpccinf.txt.
type exampleFile struct {
	lines     []string
	job       document
	configMap document
}

// splitExample finds the HPCJob and the ConfigMap holding hpccinf.txt in a multi-document YAML
// file. The HPCJob is read leniently here (fields this build does not know are ignored): only
// its tasks and memory matter; the examples' test decodes it strictly as the placer does.
func splitExample(data []byte, source string) (exampleFile, *v1alpha1.HPCJob, *corev1.ConfigMap, error) {
	f := exampleFile{lines: strings.SplitAfter(string(data), "\n")}
	var (
		docs []document
		from int
	)
	for i := 0; i <= len(f.lines); i++ {
		if i < len(f.lines) && strings.TrimRight(f.lines[i], " \t\r\n") != "---" {
			continue
		}
		d := document{start: from, end: i, data: []byte(strings.Join(f.lines[from:i], ""))}
		var meta struct{ Kind string }
		if err := yaml.Unmarshal(d.data, &meta); err != nil {
			return f, nil, nil, fmt.Errorf("%s: document at line %d: %w", source, from+1, err)
		}
		d.kind = meta.Kind
		docs = append(docs, d)
		from = i + 1
	}
	var (
		job   *v1alpha1.HPCJob
		cm    *corev1.ConfigMap
		found []string
	)
	for _, d := range docs {
		switch d.kind {
		case v1alpha1.Kind:
			if job != nil {
				return f, nil, nil, fmt.Errorf("%s: more than one HPCJob (line %d and line %d): keep one job per file", source, f.job.start+1, d.start+1)
			}
			job, f.job = &v1alpha1.HPCJob{}, d
			if err := yaml.Unmarshal(d.data, job); err != nil {
				return f, nil, nil, fmt.Errorf("%s: HPCJob at line %d: %w", source, d.start+1, err)
			}
		case "ConfigMap":
			var c corev1.ConfigMap
			if err := yaml.Unmarshal(d.data, &c); err != nil {
				return f, nil, nil, fmt.Errorf("%s: ConfigMap at line %d: %w", source, d.start+1, err)
			}
			if _, ok := c.Data[infKey]; ok {
				found = append(found, c.Name)
				cm, f.configMap = &c, d
			}
		}
	}
	switch {
	case job == nil:
		return f, nil, nil, fmt.Errorf("%s: no HPCJob (kind: %s) in the file", source, v1alpha1.Kind)
	case len(found) != 1:
		return f, nil, nil, fmt.Errorf("%s: want one ConfigMap with data.%s, found %d %v", source, infKey, len(found), found)
	}
	return f, job, cm, nil
}

// updateExample returns the file with its ConfigMap's hpccinf.txt regenerated for its HPCJob's
// tasks and memory under the default sizing, and that input.
func updateExample(data []byte, source string) ([]byte, hpcc.Input, error) {
	f, job, cm, err := splitExample(data, source)
	if err != nil {
		return nil, hpcc.Input{}, err
	}
	mem := job.Spec.TaskResources.Memory
	in, err := hpcc.Size(hpcc.DefaultSizing(int(job.Spec.Tasks), mem.Value()))
	if err != nil {
		return nil, hpcc.Input{}, fmt.Errorf("%s: HPCJob %s (tasks %d, taskResources.memory %s): %w", source, job.Name, job.Spec.Tasks, mem.String(), err)
	}
	var text bytes.Buffer
	if _, err := in.WriteTo(&text); err != nil {
		return nil, hpcc.Input{}, fmt.Errorf("%s: %w", source, err)
	}
	out, err := f.replaceBlock(text.String())
	if err != nil {
		return nil, hpcc.Input{}, fmt.Errorf("%s: ConfigMap %s (document at line %d): %w", source, cm.Name, f.configMap.start+1, err)
	}
	// Check the edit: the file must read back with exactly the new text in the ConfigMap.
	_, _, again, err := splitExample(out, source)
	if err != nil {
		return nil, hpcc.Input{}, fmt.Errorf("rewriting %s broke it: %w", source, err)
	}
	if again.Data[infKey] != text.String() {
		return nil, hpcc.Input{}, fmt.Errorf("%s: ConfigMap %s does not read back the hpccinf.txt written into it; is the block indented as its key + 2 spaces?", source, cm.Name)
	}
	return out, in, nil
}

// replaceBlock swaps the lines of the ConfigMap's hpccinf.txt literal block for text, indented
// two spaces deeper than the key. Blank lines after the block stay where they are.
func (f exampleFile) replaceBlock(text string) ([]byte, error) {
	open, indent := -1, ""
	for i := f.configMap.start; i < f.configMap.end; i++ {
		if m := infBlock.FindStringSubmatch(strings.TrimRight(f.lines[i], " \t\r\n")); m != nil {
			open, indent = i, m[1]
			break
		}
	}
	if open < 0 {
		return nil, errors.New(`data.hpccinf.txt must be a literal block, the line "hpccinf.txt: |" followed by the file indented under it`)
	}
	end := open + 1 // one past the block's last non-blank line
	for i := open + 1; i < f.configMap.end; i++ {
		line := strings.TrimRight(f.lines[i], " \t\r\n")
		if line == "" {
			continue
		}
		if !strings.HasPrefix(line, indent+" ") {
			break
		}
		end = i + 1
	}
	var b strings.Builder
	for _, l := range f.lines[:open+1] {
		b.WriteString(l)
	}
	for _, l := range strings.SplitAfter(strings.TrimSuffix(text, "\n"), "\n") {
		b.WriteString(indent + "  " + strings.TrimSuffix(l, "\n") + "\n")
	}
	for _, l := range f.lines[end:] {
		b.WriteString(l)
	}
	return []byte(b.String()), nil
}
