package a2a

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/auth"
)

// The JSON-RPC 2.0 and A2A error codes this agent answers with.
const (
	CodeParseError               = -32700
	CodeInvalidRequest           = -32600
	CodeMethodNotFound           = -32601
	CodeInvalidParams            = -32602
	CodeInternal                 = -32603
	CodeServer                   = -32000 // a conflict or a limit: the message says which
	CodeTaskNotFound             = -32001
	CodeTaskNotCancelable        = -32002
	CodePushNotSupported         = -32003
	CodeUnsupportedOperation     = -32004
	CodeContentTypeNotSupported  = -32005
	CodeVersionNotSupported      = -32009
	jsonrpcVersion               = "2.0"
	versionHeader                = "A2A-Version"
	maxTaskHistoryMessagesToRead = 200
)

// Error is a JSON-RPC error object.
type Error struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

func (e *Error) Error() string { return e.Message }

func rpcError(code int, msg string) *Error { return &Error{Code: code, Message: msg} }

// request is a JSON-RPC request.
type request struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  *string         `json:"method"`
	Params  json.RawMessage `json:"params"`
}

// response is a JSON-RPC response: Result or Error.
type response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

var nullID = json.RawMessage("null")

// Handler is the JSON-RPC endpoint (POST). It expects the caller's
// principal in the request's context (auth.WithPrincipal): without one it
// answers 401. A JSON-RPC error is answered with HTTP 200, as the binding
// specifies; a streaming method answers text/event-stream once its task
// exists, and a JSON error before that.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := auth.PrincipalFrom(r.Context()); !ok {
			http.Error(w, "missing or malformed Authorization: Bearer <api key>", http.StatusUnauthorized)
			return
		}
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		req, rerr := decodeRequest(r)
		if rerr != nil {
			id := nullID
			if req != nil && validID(req.ID) {
				id = req.ID
			}
			writeJSON(w, response{JSONRPC: jsonrpcVersion, ID: id, Error: rerr})
			return
		}
		if v := r.Header.Get(versionHeader); v != "" && !supportedVersion(v) {
			writeJSON(w, response{JSONRPC: jsonrpcVersion, ID: req.ID,
				Error: rpcError(CodeVersionNotSupported, "A2A version "+v+" is not supported; this agent speaks "+ProtocolVersion)})
			return
		}
		s.dispatch(w, r, req)
	})
}

// decodeRequest reads one JSON-RPC request: a body that is not JSON is a
// parse error; a batch, a missing or wrong jsonrpc, method or id an
// invalid request.
func decodeRequest(r *http.Request) (*request, *Error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, rpcError(CodeParseError, "the request body could not be read")
	}
	body = bytes.TrimSpace(body)
	if !json.Valid(body) {
		return nil, rpcError(CodeParseError, "the request body is not JSON")
	}
	if len(body) > 0 && body[0] == '[' {
		return nil, rpcError(CodeInvalidRequest, "batch requests are not supported: send one request per POST")
	}
	var req request
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, rpcError(CodeInvalidRequest, "the request is not a JSON-RPC request object")
	}
	switch {
	case req.JSONRPC != jsonrpcVersion:
		return &req, rpcError(CodeInvalidRequest, `jsonrpc must be "2.0"`)
	case !validID(req.ID) || string(req.ID) == "null":
		return &req, rpcError(CodeInvalidRequest, "id is required: a string or a number")
	case req.Method == nil || *req.Method == "":
		return &req, rpcError(CodeInvalidRequest, "method is required")
	}
	return &req, nil
}

// validID reports whether id is a JSON-RPC id: a string, a number or null.
func validID(id json.RawMessage) bool {
	if len(id) == 0 {
		return false
	}
	switch id[0] {
	case '"', 'n', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return true
	}
	return false
}

// supportedVersion reports whether an A2A-Version header names 1.x.
func supportedVersion(v string) bool {
	v = strings.TrimSpace(v)
	return v == "1" || strings.HasPrefix(v, "1.")
}

// dispatch answers req: the streaming methods write their own response.
func (s *Server) dispatch(w http.ResponseWriter, r *http.Request, req *request) {
	ctx := r.Context()
	var result any
	var err error
	switch *req.Method {
	case "SendMessage":
		var params SendMessageRequest
		if err = decodeParams(req.Params, &params); err == nil {
			result, err = s.sendMessage(ctx, params)
		}
	case "GetTask":
		var params GetTaskRequest
		if err = decodeParams(req.Params, &params); err == nil {
			result, err = s.getTask(ctx, params)
		}
	case "CancelTask":
		var params TaskIDRequest
		if err = decodeParams(req.Params, &params); err == nil {
			result, err = s.cancelTask(ctx, params)
		}
	case "SendStreamingMessage":
		var params SendMessageRequest
		if err = decodeParams(req.Params, &params); err == nil {
			err = s.sendStreamingMessage(ctx, w, req.ID, params)
		}
	case "SubscribeToTask":
		var params TaskIDRequest
		if err = decodeParams(req.Params, &params); err == nil {
			err = s.subscribeToTask(ctx, w, req.ID, params)
		}
	case "ListTasks", "GetExtendedAgentCard":
		err = rpcError(CodeUnsupportedOperation, *req.Method+" is not supported by this agent")
	case "CreateTaskPushNotificationConfig", "GetTaskPushNotificationConfig", "ListTaskPushNotificationConfigs",
		"DeleteTaskPushNotificationConfig":
		err = rpcError(CodePushNotSupported, "push notifications are not supported: stream the task or poll GetTask")
	default:
		err = &Error{Code: CodeMethodNotFound, Message: "method not found: " + *req.Method}
	}
	if errors.Is(err, errStreamed) {
		return
	}
	if err != nil {
		writeJSON(w, response{JSONRPC: jsonrpcVersion, ID: req.ID, Error: s.rpcErrorOf(ctx, err)})
		return
	}
	writeJSON(w, response{JSONRPC: jsonrpcVersion, ID: req.ID, Result: result})
}

// errStreamed says a streaming method wrote its response (an SSE stream).
var errStreamed = errors.New("streamed")

// decodeParams decodes params into v: absent params, unknown fields or a
// wrong type are invalid params.
func decodeParams(params json.RawMessage, v any) error {
	if len(params) == 0 || string(params) == "null" {
		return rpcError(CodeInvalidParams, "params are required")
	}
	dec := json.NewDecoder(bytes.NewReader(params))
	if err := dec.Decode(v); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) && ute.Field != "" {
			return &Error{Code: CodeInvalidParams, Message: "invalid params: " + ute.Field + " must be " + ute.Type.String(),
				Data: map[string]string{"field": ute.Field}}
		}
		return rpcError(CodeInvalidParams, "invalid params: an object of the method's fields is required")
	}
	return nil
}

// invalidParams is a -32602 naming the fields at fault.
func invalidParams(fields ...apperr.FieldError) *Error {
	msgs := make([]string, 0, len(fields))
	for _, f := range fields {
		msgs = append(msgs, f.Field+" "+f.Message)
	}
	return &Error{Code: CodeInvalidParams, Message: "invalid params: " + strings.Join(msgs, "; "), Data: map[string]any{"fields": fields}}
}

// rpcErrorOf is err as a JSON-RPC error the caller may read: an *Error as
// it is; an apperr's code and message (invalid input and a session not
// found are invalid params, a conflict or a limit a server error); anything
// else "internal error" (logged).
func (s *Server) rpcErrorOf(ctx context.Context, err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	switch apperr.CodeOf(err) {
	case apperr.Invalid:
		if fields := apperr.FieldsOf(err); len(fields) > 0 {
			return invalidParams(fields...)
		}
		return rpcError(CodeInvalidParams, apperr.MessageOf(err))
	case apperr.NotFound:
		return rpcError(CodeInvalidParams, apperr.MessageOf(err))
	case apperr.Internal:
		s.cfg.Logger.Error().Ctx(ctx).Err(err).Msg("a2a request")
		return rpcError(CodeInternal, "internal error")
	}
	return &Error{Code: CodeServer, Message: apperr.MessageOf(err), Data: map[string]string{"code": string(apperr.CodeOf(err))}}
}

func writeJSON(w http.ResponseWriter, resp response) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}
