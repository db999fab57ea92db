package persistence

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
)

// Merged statements. A plan layer's batch updates each of its steps twice
// (the ends of the layer before, the starts of its own) and each of its
// executors once (their ends): a dozen single-row UPDATEs of two or three
// kinds, each a statement the server parses, plans and runs on its own.
// The pipeline sends the UPDATEs of one kind as one statement instead —
// `UPDATE … FROM (VALUES …)`, its rows' keys RETURNING — and hands each
// its outcome as if it had run alone: one row matched, or none (the write
// that gave it fails). Only distinct rows are merged (a step started and
// ended in the same batch keeps both statements, in order), and never
// across a statement that reads. A merged statement that fails for a
// reason of its own fails the attempt with errMergeFailed, and the batch is
// tried again without merging, so the failure is found at the write that
// caused it. The executors a batch starts (each one statement of three
// INSERTs) are merged the same way, their VALUES repeated, where the first
// of them was: what follows may update the rows they insert.

// errMergeFailed is an attempt whose merged statement failed for a reason
// of its own: the batch is tried again with each statement alone.
var errMergeFailed = errors.New("persistence: a merged statement failed")

// mergeRule is how statements of one text become one: single-row UPDATEs
// (table, cols, set, key), or INSERTs of one row into each of their
// tables (insert).
type mergeRule struct {
	table string
	// cols are the statement's arguments, in order, as "name::type".
	cols []string
	// set is the SET list over v, the rows' VALUES.
	set string
	// key are the indexes of cols that name the row (WHERE, RETURNING).
	key []int
	// insert, when set, is the INSERT statement (its ? placeholders):
	// its VALUES tuples are repeated, one a member, each tuple's
	// arguments taken from every member in turn. Inserts are merged where
	// the first of them was (what follows may update their rows).
	insert string
}

// valuesTuple is one VALUES tuple of placeholders.
var valuesTuple = regexp.MustCompile(`VALUES \((\?,)*\?\)`)

// mergeRules are the statements the pipeline merges, by their PostgreSQL
// text.
var mergeRules = sync.OnceValue(func() map[string]*mergeRule {
	return map[string]*mergeRule{
		dollars(updateStepSQL): {table: "agent_plan_steps",
			cols: []string{"status::text", "result::text", "error::text", "started_at::timestamptz", "completed_at::timestamptz",
				"plan_id::text", "number::integer"},
			set: "status = v.status, result = v.result, error = v.error, started_at = v.started_at, completed_at = v.completed_at",
			key: []int{5, 6}},
		dollars(finishExecutionSQL): {table: "agent_executions",
			cols: []string{"status::text", "result::text", "error::text", "input_tokens::integer", "output_tokens::integer",
				"tool_calls::integer", "completed_at::timestamptz", "duration_ms::bigint", "id::text"},
			set: "status = v.status, result = v.result, error = v.error, input_tokens = v.input_tokens, output_tokens = v.output_tokens, " +
				"tool_calls = v.tool_calls, completed_at = v.completed_at, duration_ms = v.duration_ms",
			key: []int{8}},
		dollars(startExecutionSQL): {insert: startExecutionSQL},
	}
})

// args is how many arguments one statement of the rule takes.
func (r *mergeRule) args() int {
	if r.insert != "" {
		return strings.Count(r.insert, "?")
	}
	return len(r.cols)
}

// insertSQL is an insert rule's statement for members, and its arguments.
func (r *mergeRule) insertSQL(members []pipeItem) (string, []any) {
	var args []any
	off := 0
	q := valuesTuple.ReplaceAllStringFunc(r.insert, func(tuple string) string {
		n := strings.Count(tuple, "?")
		tuples := make([]string, len(members))
		for i, m := range members {
			tuples[i] = strings.TrimPrefix(tuple, "VALUES ")
			args = append(args, m.args[off:off+n]...)
		}
		off += n
		return "VALUES " + strings.Join(tuples, ",")
	})
	return dollars(q), args
}

// sql is the merged statement for n rows.
func (r *mergeRule) sql(n int) string {
	var sb strings.Builder
	names := make([]string, len(r.cols))
	for i, c := range r.cols {
		names[i], _, _ = strings.Cut(c, "::")
	}
	fmt.Fprintf(&sb, "UPDATE %s AS t SET %s FROM (VALUES ", r.table, r.set)
	arg := 0
	for row := range n {
		if row > 0 {
			sb.WriteByte(',')
		}
		sb.WriteByte('(')
		for i, c := range r.cols {
			if i > 0 {
				sb.WriteByte(',')
			}
			arg++
			_, typ, _ := strings.Cut(c, "::")
			fmt.Fprintf(&sb, "$%d::%s", arg, typ)
		}
		sb.WriteByte(')')
	}
	fmt.Fprintf(&sb, ") AS v(%s) WHERE ", strings.Join(names, ", "))
	for i, k := range r.key {
		if i > 0 {
			sb.WriteString(" AND ")
		}
		fmt.Fprintf(&sb, "t.%s = v.%s", names[k], names[k])
	}
	sb.WriteString(" RETURNING ")
	for i, k := range r.key {
		if i > 0 {
			sb.WriteString(", ")
		}
		fmt.Fprintf(&sb, "t.%s", names[k])
	}
	return sb.String()
}

// keyOf is the key of a row given by args, as the merged statement returns
// it.
func (r *mergeRule) keyOf(args []any) string {
	vals := make([]any, len(r.key))
	for i, k := range r.key {
		vals[i] = args[k]
	}
	return joinKey(vals)
}

// joinKey is the key of a row whose key columns hold vals.
func joinKey(vals []any) string {
	parts := make([]string, len(vals))
	for i, v := range vals {
		parts[i] = fmt.Sprint(v)
	}
	return strings.Join(parts, "\x00")
}

// merge returns items with the single-row UPDATEs of each merge rule that
// name distinct rows replaced by one statement, placed where the last of
// them was. Statements that read split items into stretches that are
// merged apart.
func merge(items []pipeItem) []pipeItem {
	rules := mergeRules()
	out := make([]pipeItem, 0, len(items))
	start := 0
	for i := 0; i <= len(items); i++ {
		if i < len(items) && items[i].read == nil {
			continue
		}
		out = append(out, mergeStretch(items[start:i], rules)...)
		if i < len(items) {
			out = append(out, items[i])
		}
		start = i + 1
	}
	return out
}

// mergeStretch merges a stretch of statements none of which reads.
func mergeStretch(items []pipeItem, rules map[string]*mergeRule) []pipeItem {
	members := map[string][]int{}
	for i, it := range items {
		if r := rules[it.query]; r != nil && len(it.args) == r.args() {
			members[it.query] = append(members[it.query], i)
		}
	}
	place := map[int]string{} // the position a merged statement takes
	skip := map[int]bool{}
	for q, at := range members {
		r := rules[q]
		if len(at) < 2 || (r.insert == "" && !distinct(r, items, at)) {
			continue
		}
		if r.insert != "" {
			place[at[0]] = q
		} else {
			place[at[len(at)-1]] = q
		}
		for _, i := range at {
			skip[i] = true
		}
	}
	if len(place) == 0 {
		return items
	}
	out := make([]pipeItem, 0, len(items))
	for i, it := range items {
		if q, ok := place[i]; ok {
			out = append(out, mergedItem(rules[q], items, members[q]))
			continue
		}
		if !skip[i] {
			out = append(out, it)
		}
	}
	return out
}

// distinct reports whether the statements at name distinct rows.
func distinct(r *mergeRule, items []pipeItem, at []int) bool {
	seen := map[string]bool{}
	for _, i := range at {
		k := r.keyOf(items[i].args)
		if seen[k] {
			return false
		}
		seen[k] = true
	}
	return true
}

// mergedItem is the statement that runs the members of items at as one.
func mergedItem(r *mergeRule, items []pipeItem, at []int) pipeItem {
	members := make([]pipeItem, len(at))
	for i, j := range at {
		members[i] = items[j]
	}
	if r.insert != "" {
		q, args := r.insertSQL(members)
		return pipeItem{query: q, args: args, merged: &mergedRows{rule: r, members: members}}
	}
	args := make([]any, 0, len(at)*len(r.cols))
	for _, m := range members {
		args = append(args, m.args...)
	}
	return pipeItem{query: r.sql(len(at)), args: args, merged: &mergedRows{rule: r, members: members}}
}

// mergedRows hands a merged statement's outcome to its members.
type mergedRows struct {
	rule    *mergeRule
	members []pipeItem
	// asserted: sent as an assertion that every row matched (asserted).
	asserted bool
}

// outcome reads the merged statement's result from br and tells each
// member whether its row matched, in the members' order; it returns the
// first error one of them returned. A failure of the statement itself is
// the batch's (transient: tried again as it is; otherwise errMergeFailed).
func (m *mergedRows) outcome(br pgx.BatchResults) error {
	if m.rule.insert != "" || m.asserted {
		// Every row is inserted (or, asserted, matched), or the statement
		// fails: one that matched too few is found alone.
		if _, err := br.Exec(); err != nil {
			return mergeFailed(err)
		}
		var first error
		for _, it := range m.members {
			if err := it.end(1, nil); first == nil {
				first = err
			}
		}
		return first
	}
	rows, err := br.Query()
	matched := map[string]bool{}
	if err == nil {
		for rows.Next() {
			vals, verr := rows.Values()
			if verr != nil {
				err = verr
				break
			}
			matched[joinKey(vals)] = true
		}
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
	}
	if err != nil {
		return mergeFailed(err)
	}
	var first error
	for _, it := range m.members {
		n := int64(0)
		if matched[m.rule.keyOf(it.args)] {
			n = 1
		}
		if err := it.end(n, nil); first == nil {
			first = err
		}
	}
	return first
}

// mergeFailed is the batch's failure when a merged statement failed with
// err: tried again as it is when err is transient, else with each
// statement alone (errMergeFailed).
func mergeFailed(err error) error {
	if transient(err) {
		return &batchFailed{err}
	}
	return &batchFailed{fmt.Errorf("%w: %w", errMergeFailed, err)}
}
