package builtin_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/tools/builtin"
)

// merges records merge requests and answers with a fixed text or error.
type merges struct {
	mu   sync.Mutex
	reqs []builtin.MergeRequest
	out  string
	err  error
}

func (m *merges) merge(_ context.Context, r builtin.MergeRequest) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reqs = append(m.reqs, r)
	return m.out, m.err
}

func TestUpdateStrategyMergeLLM(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			m := &merges{out: "Launch on June 1 (moved from May 1), with the press."}
			w := newWS(t, driver)
			w.all = builtin.Tools(w.store, builtin.WithMerger(m.merge))
			out := w.call(t, "alice", "create_document", map[string]any{"title": "Plan", "content": "Launch on May 1."})
			require.True(t, out.Success, out.Content)
			docID := idIn(t, out.Content)
			details := func() builtin.Entity {
				o := w.call(t, "alice", "get_document_details", map[string]any{"id": docID})
				require.True(t, o.Success, o.Content)
				var e builtin.Entity
				require.NoError(t, json.Unmarshal([]byte(o.Content), &e))
				return e
			}

			out = w.call(t, "alice", "update_document", map[string]any{"id": docID, "content": "Launch moved to June 1.", "strategy": "merge_llm"})
			require.True(t, out.Success, out.Content)
			require.Equal(t, []builtin.MergeRequest{{EntityType: "document", Title: "Plan", Field: "content",
				Current: "Launch on May 1.", Addition: "Launch moved to June 1."}}, m.reqs)
			require.Equal(t, m.out, details().Description, "the merged text is stored")

			// A failed merge changes nothing.
			m.err = errors.New("model down")
			out = w.call(t, "alice", "update_document", map[string]any{"id": docID, "content": "x", "status": "final", "strategy": "merge_llm"})
			require.False(t, out.Success)
			require.Contains(t, out.Content, "model down")
			require.Equal(t, m.out, details().Description)
			require.Empty(t, details().Status, "nothing of a failed update is stored")

			// An empty answer is refused too.
			m.err, m.out = nil, "  "
			out = w.call(t, "alice", "update_document", map[string]any{"id": docID, "content": "x", "strategy": "merge_llm"})
			require.False(t, out.Success)
			require.Contains(t, out.Content, "gave no text")

			// Nothing to merge into: no model call.
			out = w.call(t, "alice", "create_task", map[string]any{"title": "Bare"})
			taskID := idIn(t, out.Content)
			calls := len(m.reqs)
			out = w.call(t, "alice", "update_task", map[string]any{"id": taskID, "description": "first words", "strategy": "merge_llm"})
			require.True(t, out.Success, out.Content)
			require.Len(t, m.reqs, calls)
		})
	}
}

func TestMergeLLMNeedsAMerger(t *testing.T) {
	t.Parallel()
	w := newWS(t, "sqlite")
	out := w.call(t, "alice", "create_task", map[string]any{"title": "T", "description": "a"})
	id := idIn(t, out.Content)
	out = w.call(t, "alice", "update_task", map[string]any{"id": id, "description": "b", "strategy": "merge_llm"})
	require.False(t, out.Success)
	require.Contains(t, out.Content, "merge_llm is not available")
	out = w.call(t, "alice", "update_task", map[string]any{"id": id, "description": "b", "strategy": "blend"})
	require.False(t, out.Success)
	require.Contains(t, out.Content, "replace, append or merge_llm")
}
