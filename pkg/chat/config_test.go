package chat_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/chat"
)

// NewService fills in defaults, then reports every bad value at once (it
// used to turn negative values into defaults silently).
func TestNewServiceReportsEveryBadValue(t *testing.T) {
	t.Parallel()
	_, err := chat.NewService(chat.Config{MaxStreamsPerUser: -1, HistoryMessages: -1, MaxMessageBytes: -5, PersistTimeout: -time.Second,
		QueuePoll: -time.Second, Multitask: "queue"})
	require.ErrorIs(t, err, apperr.ErrInvalid)
	var fields []string
	for _, f := range apperr.FieldsOf(err) {
		fields = append(fields, f.Field)
	}
	require.Equal(t, []string{"Store", "Runner", "Planner", "MaxStreamsPerUser", "HistoryMessages", "MaxMessageBytes", "PersistTimeout", "QueuePoll", "Multitask"}, fields)
}
