package status

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"sigs.k8s.io/yaml"
)

// Print writes s in the given format: "" or "table" (as kubectl get
// prints), "wide" (with the messages), "yaml" or "json".
func Print(w io.Writer, s Status, format string) error {
	switch format {
	case "", "table", "wide":
		return printTable(w, s, format == "wide")
	case "yaml":
		b, err := yaml.Marshal(view(s))
		if err != nil {
			return fmt.Errorf("encoding YAML: %w", err)
		}
		_, err = w.Write(b)
		return err
	case "json":
		b, err := json.MarshalIndent(view(s), "", "  ")
		if err != nil {
			return fmt.Errorf("encoding JSON: %w", err)
		}
		_, err = fmt.Fprintln(w, string(b))
		return err
	}
	return fmt.Errorf("unknown output format %q: use table, wide, yaml or json", format)
}

// printed is what -o yaml and -o json show; the warnings are always there,
// {} when there are none.
type printed struct {
	Shards   any      `json:"shards"`
	Error    string   `json:"error,omitempty"`
	Warnings Warnings `json:"warnings"`
}

func view(s Status) printed {
	return printed{Shards: s.Shards, Error: s.Error, Warnings: s.Warnings}
}

func printTable(w io.Writer, s Status, wide bool) error {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	header := "SHARD\tSTATE\tREADY\tMAPPED"
	if wide {
		header += "\tMESSAGE"
	}
	fmt.Fprintln(tw, header)
	for _, sh := range s.Shards {
		kinds := make([]string, 0, len(sh.Mapped))
		for k := range sh.Mapped {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		mapped := make([]string, 0, len(kinds))
		for _, k := range kinds {
			mapped = append(mapped, fmt.Sprintf("%s=%d", k, sh.Mapped[k]))
		}
		m := strings.Join(mapped, ",")
		if m == "" {
			m = "<none>"
		}
		line := fmt.Sprintf("%s\t%s\t%d/%d\t%s", sh.ID, sh.State, sh.Ready, sh.Desired, m)
		if wide {
			line += "\t" + sh.Message
		}
		fmt.Fprintln(tw, line)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if s.Error != "" {
		fmt.Fprintf(w, "\nThe shard ConfigMap is rejected, nothing changes until it is fixed: %s\n", s.Error)
	}
	for _, u := range s.Warnings.UnknownShards {
		fmt.Fprintf(w, "\nWarning: %s\n", unknownMessage(u))
	}
	if s.Warnings.MoreUnknownShards > 0 {
		fmt.Fprintf(w, "\nWarning: %s\n", moreUnknownMessage(s.Warnings))
	}
	for _, src := range s.Warnings.NotShardAware {
		fmt.Fprintf(w, "\nWarning: %s\n", notShardAwareMessage(src))
	}
	if c := s.Warnings.CrossShard; c != nil {
		fmt.Fprintf(w, "\nWarning: %s\n", crossShardMessage(*c))
	}
	if s.Warnings.FailoverWithheld != "" {
		fmt.Fprintf(w, "\nWarning: %s\n", s.Warnings.FailoverWithheld)
	}
	for _, sh := range s.Shards {
		if sh.Message != "" && !wide {
			fmt.Fprintf(w, "\n%s: %s\n", sh.ID, sh.Message)
		}
		if sh.JobPlacement != "" {
			fmt.Fprintf(w, "\nWarning: %s\n", sh.JobPlacement)
		}
	}
	return nil
}
