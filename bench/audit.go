package main

import (
	"bufio"
	"encoding"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"
)

// callKey is a kind of request: the audit verb and the resource (with its
// subresource). A watch that asks for the initial events
// (sendInitialEvents=true) is a list by other means and gets the verb
// "watchlist".
type callKey struct{ verb, resource string }

// calls counts requests by kind.
type calls map[callKey]int

func isWrite(verb string) bool {
	switch verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

func isList(verb string) bool { return verb == "list" || verb == "watchlist" }

func (c calls) count(match func(callKey) bool) int {
	n := 0
	for k, v := range c {
		if match(k) {
			n += v
		}
	}
	return n
}

func (c calls) filter(match func(callKey) bool) calls {
	out := calls{}
	for k, v := range c {
		if match(k) {
			out[k] = v
		}
	}
	return out
}

// Writes counts the writes, and Lists the lists (watchlists included).
func (c calls) Writes() int { return c.count(func(k callKey) bool { return isWrite(k.verb) }) }

// Lists: see Writes.
func (c calls) Lists() int { return c.count(func(k callKey) bool { return isList(k.verb) }) }

// A callKey is a JSON object's key: calls are saved in results.json.
var (
	_ encoding.TextMarshaler   = callKey{}
	_ encoding.TextUnmarshaler = (*callKey)(nil)
)

// MarshalText writes the key as "verb resource", so that calls can be a
// JSON object; a verb has no space.
func (k callKey) MarshalText() ([]byte, error) { return []byte(k.verb + " " + k.resource), nil }

// UnmarshalText reads what MarshalText wrote.
func (k *callKey) UnmarshalText(b []byte) error {
	verb, resource, ok := strings.Cut(string(b), " ")
	if !ok {
		return fmt.Errorf("%q is not \"verb resource\"", b)
	}
	*k = callKey{verb, resource}
	return nil
}

// String lists the counts as "verb resource: n", most frequent first.
func (c calls) String() string {
	type kv struct {
		k callKey
		n int
	}
	var all []kv
	for k, n := range c {
		all = append(all, kv{k, n})
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].n != all[j].n {
			return all[i].n > all[j].n
		}
		return all[i].k.verb+all[i].k.resource < all[j].k.verb+all[j].k.resource
	})
	var parts []string
	for _, e := range all {
		parts = append(parts, fmt.Sprintf("%s %s: %d", e.k.verb, e.k.resource, e.n))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

type auditEvent struct {
	AuditID    string `json:"auditID"`
	Stage      string `json:"stage"`
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
	StageTimestamp           time.Time `json:"stageTimestamp"`
	ResponseStatus           *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

// failedMark follows the resource of a write that failed, with its code.
const failedMark = " → "

// readAudit counts the daemon user's requests received in [from, to], as
// the API server's audit log holds them. Each request is counted once, at the
// first stage logged for it (a watch is logged when its response starts).
func readAudit(path string, from, to time.Time) (calls, error) {
	return readAuditQ(path, DaemonUser, from, to, false)
}

// readAuditQ is readAudit for the requests of user; withQuery keeps the
// paging and resourceVersion parameters of lists in the resource, to show
// how a list was made.
func readAuditQ(path, user string, from, to time.Time, withQuery bool) (calls, error) {
	out := calls{}
	seen := map[string]bool{}
	err := eachAuditEvent(path, func(ev auditEvent) {
		if ev.User.Username != user || seen[ev.AuditID] {
			return
		}
		if ev.RequestReceivedTimestamp.Before(from) || ev.RequestReceivedTimestamp.After(to) {
			return
		}
		seen[ev.AuditID] = true
		k := callKey{verb: ev.Verb, resource: "(non-resource) " + pathOnly(ev.RequestURI)}
		if ev.ObjectRef != nil {
			k.resource = ev.ObjectRef.Resource
			if ev.ObjectRef.Subresource != "" {
				k.resource += "/" + ev.ObjectRef.Subresource
			}
		}
		if isWrite(ev.Verb) && ev.ResponseStatus != nil && ev.ResponseStatus.Code >= 400 {
			k.resource += fmt.Sprintf("%s%d", failedMark, ev.ResponseStatus.Code)
		}
		if ev.Verb == "watch" && strings.Contains(ev.RequestURI, "sendInitialEvents=true") {
			k.verb = "watchlist"
		}
		if withQuery && (k.verb == "list" || k.verb == "watchlist") {
			k.resource += " ?" + listQuery(ev.RequestURI)
		}
		out[k]++
	})
	return out, err
}

// eachAuditEvent calls f with every event of the audit log at path.
func eachAuditEvent(path string, f func(auditEvent)) error {
	return eachLine(path, func(line []byte) error {
		var ev auditEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			return fmt.Errorf("audit log %s: %w", path, err)
		}
		f(ev)
		return nil
	})
}

// eachLine calls f with every line of the file at path (up to 16 MiB
// each), and stops at f's first error.
func eachLine(path string, f func([]byte) error) error {
	file, err := os.Open(path)
	if err != nil {
		return err
	}
	defer file.Close()
	sc := bufio.NewScanner(file)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		if err := f(sc.Bytes()); err != nil {
			return err
		}
	}
	return sc.Err()
}

// listQuery returns the limit and resourceVersion parameters of a list
// request, and whether it continues a paged list.
func listQuery(uri string) string {
	_, q, _ := strings.Cut(uri, "?")
	var keep []string
	for kv := range strings.SplitSeq(q, "&") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "limit", "resourceVersion", "resourceVersionMatch", "sendInitialEvents":
			keep = append(keep, k+"="+v)
		case "continue":
			keep = append(keep, "continue")
		}
	}
	sort.Strings(keep)
	return strings.Join(keep, "&")
}

func pathOnly(uri string) string {
	p, _, _ := strings.Cut(uri, "?")
	return p
}
