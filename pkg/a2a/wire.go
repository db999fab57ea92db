package a2a

import (
	"encoding/json"
	"time"
)

// The A2A v1.0 types this agent reads and writes, in the JSON form of the
// specification's protobuf (lf.a2a.v1): camelCase fields, enums by name,
// oneofs as the one member that is set.

// TaskState is a task's state (the v1.0 enum names).
type TaskState string

// The states a task of this agent takes.
const (
	StateWorking       TaskState = "TASK_STATE_WORKING"
	StateInputRequired TaskState = "TASK_STATE_INPUT_REQUIRED"
	StateCompleted     TaskState = "TASK_STATE_COMPLETED"
	StateFailed        TaskState = "TASK_STATE_FAILED"
	StateCanceled      TaskState = "TASK_STATE_CANCELED"
)

// Terminal reports whether a task in state s is over for good (input
// required is interrupted, not terminal: a reply continues its context).
func (s TaskState) Terminal() bool {
	return s == StateCompleted || s == StateFailed || s == StateCanceled
}

// Role is who wrote a message.
type Role string

// The roles of a message.
const (
	RoleUser  Role = "ROLE_USER"
	RoleAgent Role = "ROLE_AGENT"
)

// Part is one piece of a message or an artifact: text or data (this agent
// reads text only; url and raw parts are refused).
type Part struct {
	Text      *string         `json:"text,omitempty"`
	Data      any             `json:"data,omitempty"`
	URL       string          `json:"url,omitempty"`
	Raw       string          `json:"raw,omitempty"`
	MediaType string          `json:"mediaType,omitempty"`
	Filename  string          `json:"filename,omitempty"`
	Metadata  json.RawMessage `json:"metadata,omitempty"`
}

// TextPart is a text part.
func TextPart(s string) Part { return Part{Text: &s} }

// Message is one turn of a conversation.
type Message struct {
	MessageID string          `json:"messageId"`
	ContextID string          `json:"contextId,omitempty"`
	TaskID    string          `json:"taskId,omitempty"`
	Role      Role            `json:"role"`
	Parts     []Part          `json:"parts"`
	Metadata  json.RawMessage `json:"metadata,omitempty"`
}

// TaskStatus is a task's state, why (message) and when.
type TaskStatus struct {
	State     TaskState `json:"state"`
	Message   *Message  `json:"message,omitempty"`
	Timestamp string    `json:"timestamp,omitempty"`
}

// Artifact is an output of a task: the answer (text) and the plan (data).
type Artifact struct {
	ArtifactID  string `json:"artifactId"`
	Name        string `json:"name,omitempty"`
	Description string `json:"description,omitempty"`
	Parts       []Part `json:"parts"`
}

// Task is a run as A2A sees it: id is the run's, contextId its chat
// session.
type Task struct {
	ID        string     `json:"id"`
	ContextID string     `json:"contextId"`
	Status    TaskStatus `json:"status"`
	Artifacts []Artifact `json:"artifacts,omitempty"`
	History   []Message  `json:"history,omitempty"`
}

// TaskStatusUpdateEvent is a streamed change of a task's status.
type TaskStatusUpdateEvent struct {
	TaskID    string     `json:"taskId"`
	ContextID string     `json:"contextId"`
	Status    TaskStatus `json:"status"`
}

// TaskArtifactUpdateEvent is a streamed artifact of a task.
type TaskArtifactUpdateEvent struct {
	TaskID    string   `json:"taskId"`
	ContextID string   `json:"contextId"`
	Artifact  Artifact `json:"artifact"`
	Append    bool     `json:"append,omitempty"`
	LastChunk bool     `json:"lastChunk,omitempty"`
}

// StreamResponse is one event of a stream: exactly one member is set.
type StreamResponse struct {
	Task           *Task                    `json:"task,omitempty"`
	StatusUpdate   *TaskStatusUpdateEvent   `json:"statusUpdate,omitempty"`
	ArtifactUpdate *TaskArtifactUpdateEvent `json:"artifactUpdate,omitempty"`
}

// SendMessageResponse is SendMessage's result: this agent always answers
// with a task.
type SendMessageResponse struct {
	Task *Task `json:"task"`
}

// SendMessageConfiguration is how a sender wants SendMessage answered.
type SendMessageConfiguration struct {
	AcceptedOutputModes []string `json:"acceptedOutputModes,omitempty"`
	HistoryLength       *int     `json:"historyLength,omitempty"`
	// ReturnImmediately answers with the task as soon as it is created;
	// otherwise SendMessage waits (up to the server's bound) until the task
	// is terminal or needs input.
	ReturnImmediately bool `json:"returnImmediately,omitempty"`
	// TaskPushNotificationConfig is refused: push notifications are not
	// supported.
	TaskPushNotificationConfig json.RawMessage `json:"taskPushNotificationConfig,omitempty"`
}

// SendMessageRequest is the params of SendMessage and
// SendStreamingMessage.
type SendMessageRequest struct {
	Tenant        string                    `json:"tenant,omitempty"`
	Message       *Message                  `json:"message"`
	Configuration *SendMessageConfiguration `json:"configuration,omitempty"`
	// Metadata may carry plan_mode: auto_execute, draft_only or
	// agent_review.
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

// GetTaskRequest is the params of GetTask.
type GetTaskRequest struct {
	Tenant        string `json:"tenant,omitempty"`
	ID            string `json:"id"`
	HistoryLength *int   `json:"historyLength,omitempty"`
}

// TaskIDRequest is the params of CancelTask and SubscribeToTask.
type TaskIDRequest struct {
	Tenant   string          `json:"tenant,omitempty"`
	ID       string          `json:"id"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

// timestamp is t as the protobuf JSON form of a Timestamp.
func timestamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}
