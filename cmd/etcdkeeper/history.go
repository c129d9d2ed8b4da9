package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdkeeper/etcdkeeper/internal/history"
	"github.com/etcdkeeper/etcdkeeper/internal/httpapi"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

// historyCallTimeout bounds each read: the cluster's, each agent's.
const historyCallTimeout = 3 * time.Second

func historyCmd() *cobra.Command {
	var path, output, name string
	var since time.Duration
	c := &cobra.Command{
		Use: "history --config FILE [-o table|json] [--since 24h]",
		Example: `  etcdkeeper history --config /etc/etcdkeeper/cluster.yaml
  etcdkeeper history --config /etc/etcdkeeper/cluster.yaml --since 24h -o json`,
		Short: "Show what the agents changed, or refused to change, and why",
		Long: `history lists every change the agents made or refused for a reason worth
knowing — joins (add-learner), promotions, removals, peer URL updates, leader
moves, repairs (with the reason and where the data went), defragmentations,
recovery steps, alarm disarms, pauses — with the time, the host, the member and the
reason, newest last. The cluster keeps the last 1000 events; each agent mirrors its own in
its state dir (history.jsonl), so that the history survives a quorum loss:
history reads the cluster and every agent it reaches (GET /history, or this
host's state dir), and merges them. What it could not read is said on stderr.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			s, err := spec.Load(path)
			if err != nil {
				fmt.Fprintln(c.ErrOrStderr(), err)
				return fmt.Errorf("%s is not valid", path)
			}
			if output != "table" && output != "json" {
				return fmt.Errorf("-o %q: use table or json", output)
			}
			evs, missed := readHistory(c.Context(), s, name)
			for _, m := range missed {
				fmt.Fprintln(c.ErrOrStderr(), "history: not read:", m)
			}
			if len(missed) == len(s.Members)+1 {
				return fmt.Errorf("no history could be read: neither the cluster nor any agent answered")
			}
			if since > 0 {
				evs = history.Since(evs, time.Now().Add(-since))
			}
			return printHistory(c.OutOrStdout(), evs, output, time.Local)
		},
	}
	c.Flags().StringVarP(&path, "config", "c", "/etc/etcdkeeper/cluster.yaml", "the spec file")
	c.Flags().StringVarP(&output, "output", "o", "table", "table or json")
	c.Flags().DurationVar(&since, "since", 0, "only the events of this last while (24h); 0: all")
	c.Flags().StringVar(&name, "name", "", "the member this host runs, to reach its agent's socket (default: by host name)")
	return c
}

// readHistory reads the cluster's history and every member's mirror at
// once, each within historyCallTimeout, and merges them; missed says
// what did not answer.
func readHistory(ctx context.Context, s *spec.Spec, name string) (evs []history.Event, missed []string) {
	lists := make([][]history.Event, len(s.Members)+1)
	errs := make([]error, len(s.Members)+1)
	var wg sync.WaitGroup
	wg.Go(func() { lists[0], errs[0] = clusterHistory(ctx, s) })
	if name == "" {
		name = hostname()
	}
	ctl, err := httpapi.NewControl(s, name)
	for i, m := range s.Members {
		wg.Go(func() {
			if err != nil {
				lists[i+1], errs[i+1] = localMirror(m, err)
				return
			}
			lists[i+1], errs[i+1] = agentHistory(ctx, ctl, m)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err == nil {
			continue
		}
		if i == 0 {
			missed = append(missed, "the cluster: "+err.Error())
		} else {
			missed = append(missed, s.Members[i-1].Name+"'s agent: "+err.Error())
		}
	}
	return history.Merge(lists...), missed
}

func clusterHistory(ctx context.Context, s *spec.Spec) ([]history.Event, error) {
	cli, err := dialSpec(s)
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, historyCallTimeout)
	defer cancel()
	return cli.History(ctx, s.Cluster.Name)
}

// agentHistory is GET /history on m's agent; an agent that does not
// answer on this host leaves its mirror to be read from its state dir.
func agentHistory(ctx context.Context, ctl *httpapi.Control, m spec.Member) ([]history.Event, error) {
	ctx, cancel := context.WithTimeout(ctx, historyCallTimeout)
	defer cancel()
	resp, err := ctl.Get(ctx, m, "/history")
	if err != nil {
		return localMirror(m, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return localMirror(m, fmt.Errorf("GET /history: %s", resp.Status))
	}
	var evs []history.Event
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&evs); err != nil {
		return nil, fmt.Errorf("GET /history: %w", err)
	}
	return evs, nil
}

// localMirror reads m's mirror from its state dir when it is on this
// host (the file exists); else it returns why the agent was not read.
func localMirror(m spec.Member, why error) ([]history.Event, error) {
	p := filepath.Join(m.StateDir, history.FileName)
	evs, err := history.ReadFile(p)
	if err != nil || evs == nil {
		return nil, why
	}
	return evs, nil
}

// printHistory prints evs as JSON or a table, times in loc.
func printHistory(w io.Writer, evs []history.Event, output string, loc *time.Location) error {
	if evs == nil {
		evs = []history.Event{}
	}
	if table, err := printJSON(w, evs, output); !table {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tHOST\tMEMBER\tEVENT\tREASON\tDETAIL")
	for _, e := range evs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", e.Time.In(loc).Format(time.DateTime), e.Host, dash(memberOf(e)), e.Kind, dash(e.Reason), dash(details(e.Detail)))
	}
	return tw.Flush()
}

func memberOf(e history.Event) string {
	switch {
	case e.Member != "" && e.MemberID != "":
		return e.Member + " " + e.MemberID
	case e.Member != "":
		return e.Member
	}
	return e.MemberID
}

// details is k=v, sorted by key.
func details(d map[string]string) string {
	keys := make([]string, 0, len(d))
	for k := range d {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%s", k, d[k])
	}
	return b.String()
}
