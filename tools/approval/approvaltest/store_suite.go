// Package approvaltest holds the contract suite of approval.Store.
package approvaltest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/tools"
	"github.com/planwright/planwright/tools/approval"
)

// StoreSuite runs the contract of an approval.Store. newStore returns an
// empty store for one case (cases run in parallel); anyUser is its
// every-user value. persistence runs it on SQLite and PostgreSQL.
func StoreSuite(t *testing.T, newStore func(t *testing.T) approval.Store, anyUser string) {
	t.Helper()
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, s approval.Store, anyUser string)
	}{
		{"a hold is stored as created and read back by run, call and kind", storedAsCreated},
		{"a second hold of the same call and kind is a conflict; another kind is not", onePerCallAndKind},
		{"decisions are stored all or none", decidedAllOrNone},
		{"of two deciders at once exactly one wins", oneDeciderWins},
		{"pending holds are listed per user", pendingPerUser},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, newStore(t), anyUser)
		})
	}
}

var t0 = time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)

func hold(run, call string, k tools.HoldKind, user string) approval.Record {
	return approval.Record{RunID: run, CallID: call, Kind: k, UserID: user, SessionID: "s1", Tool: "mail.send",
		Arguments: json.RawMessage(`{"to":"bob@example.com"}`), Effect: tools.SideEffect, Reason: "side effects need approval",
		Source: event.Source{Role: event.RoleExecutor, AgentID: "a1", PlanID: "p1", StepNumber: 2, ExecutionID: "e1"},
		State:  approval.Pending, CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}
}

func storedAsCreated(t *testing.T, s approval.Store, _ string) {
	ctx := context.Background()
	in := hold("r1", "c1", tools.HoldApproval, "alice")
	require.NoError(t, s.CreateHold(ctx, &in))
	require.NotEmpty(t, in.ID)

	got, err := s.Hold(ctx, "r1", "c1", tools.HoldApproval)
	require.NoError(t, err)
	require.Equal(t, in.ID, got.ID)
	require.Equal(t, approval.Pending, got.State)
	require.JSONEq(t, `{"to":"bob@example.com"}`, string(got.Arguments))
	require.Nil(t, got.EditedArguments)
	require.Equal(t, in.Source, got.Source)
	require.Equal(t, tools.SideEffect, got.Effect)
	require.True(t, got.CreatedAt.Equal(t0))
	require.True(t, got.ExpiresAt.Equal(t0.Add(time.Hour)))
	require.Nil(t, got.DecidedAt)

	_, err = s.Hold(ctx, "r1", "c1", tools.HoldInDoubt)
	require.Equal(t, apperr.NotFound, apperr.CodeOf(err))
	_, err = s.Hold(ctx, "r2", "c1", tools.HoldApproval)
	require.Equal(t, apperr.NotFound, apperr.CodeOf(err))

	of, err := s.ExecutionHolds(ctx, "e1")
	require.NoError(t, err)
	require.Len(t, of, 1)
	require.Equal(t, in.ID, of[0].ID)
	none, err := s.ExecutionHolds(ctx, "e2")
	require.NoError(t, err)
	require.Empty(t, none)
}

func onePerCallAndKind(t *testing.T, s approval.Store, _ string) {
	ctx := context.Background()
	a := hold("r1", "c1", tools.HoldApproval, "alice")
	require.NoError(t, s.CreateHold(ctx, &a))
	again := hold("r1", "c1", tools.HoldApproval, "alice")
	require.Equal(t, apperr.Conflict, apperr.CodeOf(s.CreateHold(ctx, &again)))
	doubt := hold("r1", "c1", tools.HoldInDoubt, "alice")
	require.NoError(t, s.CreateHold(ctx, &doubt))
	all, err := s.RunHolds(ctx, "r1")
	require.NoError(t, err)
	require.Len(t, all, 2)
}

func decidedAllOrNone(t *testing.T, s approval.Store, _ string) {
	ctx := context.Background()
	a, b := hold("r1", "c1", tools.HoldApproval, "alice"), hold("r1", "c2", tools.HoldApproval, "alice")
	b.CreatedAt = t0.Add(time.Second)
	require.NoError(t, s.CreateHold(ctx, &a))
	require.NoError(t, s.CreateHold(ctx, &b))
	at := t0.Add(time.Minute)
	require.NoError(t, s.DecideHolds(ctx, "r1", []approval.Decided{{ID: a.ID, State: approval.Approved,
		EditedArguments: json.RawMessage(`{"to":"carol@example.com"}`), By: "alice", At: at}}))

	// b is pending, a is not: neither changes.
	err := s.DecideHolds(ctx, "r1", []approval.Decided{
		{ID: b.ID, State: approval.Rejected, Reason: "no", By: "alice", At: at},
		{ID: a.ID, State: approval.Rejected, Reason: "no", By: "alice", At: at},
	})
	require.Equal(t, apperr.Conflict, apperr.CodeOf(err))
	got, err := s.RunHolds(ctx, "r1")
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Equal(t, approval.Approved, got[0].State)
	require.JSONEq(t, `{"to":"bob@example.com"}`, string(got[0].Arguments), "the original arguments are kept")
	require.JSONEq(t, `{"to":"carol@example.com"}`, string(got[0].EditedArguments))
	require.Equal(t, "alice", got[0].DecidedBy)
	require.NotNil(t, got[0].DecidedAt)
	require.True(t, got[0].DecidedAt.Equal(at))
	require.Equal(t, approval.Pending, got[1].State, "a refused batch changes nothing")

	// Another run's hold is not this run's to decide.
	err = s.DecideHolds(ctx, "r2", []approval.Decided{{ID: b.ID, State: approval.Rejected, By: "mallory", At: at}})
	require.Error(t, err)
	require.NoError(t, s.DecideHolds(ctx, "r1", []approval.Decided{{ID: b.ID, State: approval.Rejected, Reason: "not now", By: "alice", At: at}}))
	got2, err := s.Hold(ctx, "r1", "c2", tools.HoldApproval)
	require.NoError(t, err)
	require.Equal(t, approval.Rejected, got2.State)
	require.Equal(t, "not now", got2.DecisionReason)
}

func oneDeciderWins(t *testing.T, s approval.Store, _ string) {
	ctx := context.Background()
	a := hold("r1", "c1", tools.HoldInDoubt, "alice")
	require.NoError(t, s.CreateHold(ctx, &a))
	const n = 4
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.DecideHolds(ctx, "r1", []approval.Decided{{ID: a.ID, State: approval.MarkedDone,
				Result: fmt.Sprintf("done by %d", i), By: "alice", At: t0}})
		}()
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		if err == nil {
			won++
		} else {
			require.Equal(t, apperr.Conflict, apperr.CodeOf(err), "%v", err)
		}
	}
	require.Equal(t, 1, won)
}

func pendingPerUser(t *testing.T, s approval.Store, anyUser string) {
	ctx := context.Background()
	a, b, c := hold("r1", "c1", tools.HoldApproval, "alice"), hold("r2", "c1", tools.HoldApproval, "bob"),
		hold("r1", "c2", tools.HoldApproval, "alice")
	for _, r := range []*approval.Record{&a, &b, &c} {
		require.NoError(t, s.CreateHold(ctx, r))
	}
	require.NoError(t, s.DecideHolds(ctx, "r1", []approval.Decided{{ID: c.ID, State: approval.TimedOut, Reason: "timeout", By: "system", At: t0}}))
	mine, err := s.PendingHolds(ctx, "alice")
	require.NoError(t, err)
	require.Len(t, mine, 1)
	require.Equal(t, a.ID, mine[0].ID)
	all, err := s.PendingHolds(ctx, anyUser)
	require.NoError(t, err)
	require.Len(t, all, 2)
	_, err = s.PendingHolds(ctx, "")
	require.Error(t, err, "a query without a user is refused")
}
