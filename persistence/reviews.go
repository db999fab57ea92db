package persistence

import (
	"context"
	"time"

	"gorm.io/gorm"

	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/planning"
)

// Reviews stores the rounds of plan review (agent_plan_reviews): each
// reviewer verdict with its comments and token usage. It is safe for
// concurrent use.
type Reviews struct{ *core }

type reviewRow struct {
	ID           string `gorm:"primaryKey"`
	PlanID       string
	Round        int
	Version      int
	Verdict      string
	Comments     string
	AgentID      string
	InputTokens  int
	OutputTokens int
	CostUSD      float64 `gorm:"column:cost_usd"`
	CreatedAt    time.Time
}

func (reviewRow) TableName() string { return "agent_plan_reviews" }

// AddReview stores one reviewer round.
func (s *Reviews) AddReview(ctx context.Context, r planning.Review) error {
	if r.ID == "" {
		r.ID = s.newID()
	}
	if r.CreatedAt.IsZero() {
		r.CreatedAt = s.now()
	}
	row := reviewRow{ID: r.ID, PlanID: r.PlanID, Round: r.Round, Version: r.Version, Verdict: string(r.Verdict), Comments: r.Comments,
		AgentID: r.AgentID, InputTokens: r.Usage.InputTokens, OutputTokens: r.Usage.OutputTokens, CostUSD: r.Usage.CostUSD,
		CreatedAt: Timestamp(r.CreatedAt)}
	return dbErr("add plan review", s.insert(ctx, &row))
}

// ListReviews lists a plan's reviews, oldest first.
func (s *Reviews) ListReviews(ctx context.Context, planID string) ([]planning.Review, error) {
	var rows []reviewRow
	if err := s.do(ctx, func(g *gorm.DB) error {
		return g.Where("plan_id = ?", planID).Order("round, created_at").Find(&rows).Error
	}); err != nil {
		return nil, dbErr("list plan reviews", err)
	}
	out := make([]planning.Review, len(rows))
	for i, r := range rows {
		out[i] = planning.Review{ID: r.ID, PlanID: r.PlanID, Round: r.Round, Version: r.Version, Verdict: planning.Verdict(r.Verdict),
			Comments: r.Comments, AgentID: r.AgentID, Usage: event.Usage{InputTokens: r.InputTokens, OutputTokens: r.OutputTokens, CostUSD: r.CostUSD},
			CreatedAt: r.CreatedAt.UTC()}
	}
	return out, nil
}
