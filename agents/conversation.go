package agents

import (
	"context"
	"fmt"
	"strings"

	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/llm"
)

// conversation is a run's conversation: the messages the model is sent,
// those Result.Messages reports (all but the system prompt), the answer's
// text exactly as the client was sent it, and the transcript every new
// message is written to. It lives on the run's goroutine.
type conversation struct {
	ctx        context.Context // the run's: a run whose owner is gone writes nothing
	events     event.Emitter
	transcript Transcript // nil: none is kept

	msgs     []llm.Message   // the conversation as the model sees it
	messages []llm.Message   // Result.Messages
	text     strings.Builder // every text delta emitted, in order
	seq      int             // transcript sequence
}

// add appends a message to the conversation, to Result.Messages (unless it
// is the system prompt) and to the transcript.
func (c *conversation) add(m llm.Message, usage event.Usage, interrupted bool) error {
	c.msgs = append(c.msgs, m)
	if m.Role != llm.RoleSystem {
		c.messages = append(c.messages, m)
	}
	if c.transcript == nil || OwnerGone(c.ctx) {
		// A run whose owner lost it writes nothing more: the next owner
		// continues from the transcript as it stands.
		return nil
	}
	c.seq++
	e := TranscriptEntry{Seq: c.seq, Message: m, Usage: usage, Interrupted: interrupted}
	if err := c.transcript.Append(context.WithoutCancel(c.ctx), e); err != nil {
		return fmt.Errorf("agents: transcript message %d: %w", c.seq, err)
	}
	return nil
}

// restored puts a recorded message back into the conversation and the
// result without writing it again.
func (c *conversation) restored(m llm.Message) {
	c.msgs = append(c.msgs, m)
	c.messages = append(c.messages, m)
}

// emitText emits a text delta. The first delta of a message that follows
// earlier text is preceded by a blank line, so the rounds of a turn read as
// paragraphs and Result.Text is exactly what the client was sent.
func (c *conversation) emitText(delta string, first bool) {
	if first {
		delta = c.paragraph(delta)
	}
	c.text.WriteString(delta)
	c.events.Emit(c.ctx, event.Text{Content: delta})
}

// restoreText adds a recorded message's text to the answer as emitText
// joined it, without emitting it again: the earlier attempt did.
func (c *conversation) restoreText(text string) {
	if text == "" {
		return
	}
	c.text.WriteString(c.paragraph(text))
}

// paragraph is text as the first delta of a message: after earlier text,
// preceded by what makes a blank line between them.
func (c *conversation) paragraph(text string) string {
	if c.text.Len() == 0 {
		return text
	}
	sofar := c.text.String()
	switch {
	case strings.HasSuffix(sofar, "\n\n"):
		return text
	case strings.HasSuffix(sofar, "\n"):
		return "\n" + text
	}
	return "\n\n" + text
}
