package a2a

import (
	"encoding/json"
	"net/http"
	"strings"
)

// ProtocolVersion is the A2A version this agent speaks.
const ProtocolVersion = "1.0"

// AgentCard is the agent's self-description, served at
// /.well-known/agent-card.json (the v1.0 AgentCard).
type AgentCard struct {
	Name                 string                    `json:"name"`
	Description          string                    `json:"description"`
	SupportedInterfaces  []AgentInterface          `json:"supportedInterfaces"`
	Provider             *AgentProvider            `json:"provider,omitempty"`
	Version              string                    `json:"version"`
	Capabilities         AgentCapabilities         `json:"capabilities"`
	SecuritySchemes      map[string]SecurityScheme `json:"securitySchemes"`
	SecurityRequirements []SecurityRequirement     `json:"securityRequirements"`
	DefaultInputModes    []string                  `json:"defaultInputModes"`
	DefaultOutputModes   []string                  `json:"defaultOutputModes"`
	Skills               []AgentSkill              `json:"skills"`
}

// AgentInterface is where and how the agent is reached.
type AgentInterface struct {
	URL             string `json:"url"`
	ProtocolBinding string `json:"protocolBinding"`
	ProtocolVersion string `json:"protocolVersion"`
}

// AgentProvider is who runs the agent.
type AgentProvider struct {
	Organization string `json:"organization"`
	URL          string `json:"url"`
}

// AgentCapabilities is what the agent supports beyond the basic methods.
type AgentCapabilities struct {
	Streaming         bool `json:"streaming"`
	PushNotifications bool `json:"pushNotifications"`
}

// SecurityScheme is one way to authenticate (here: an HTTP bearer token).
type SecurityScheme struct {
	HTTPAuthSecurityScheme *HTTPAuthSecurityScheme `json:"httpAuthSecurityScheme,omitempty"`
}

// HTTPAuthSecurityScheme is HTTP authentication with a scheme.
type HTTPAuthSecurityScheme struct {
	Description  string `json:"description,omitempty"`
	Scheme       string `json:"scheme"`
	BearerFormat string `json:"bearerFormat,omitempty"`
}

// SecurityRequirement names the schemes a request must satisfy.
type SecurityRequirement struct {
	Schemes map[string]StringList `json:"schemes"`
}

// StringList is a list of scopes (none for a bearer token).
type StringList struct {
	List []string `json:"list"`
}

// AgentSkill is something the agent does.
type AgentSkill struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Tags        []string `json:"tags"`
	Examples    []string `json:"examples,omitempty"`
	InputModes  []string `json:"inputModes,omitempty"`
	OutputModes []string `json:"outputModes,omitempty"`
}

// Card is the agent card, with the JSON-RPC endpoint at endpoint (an
// absolute URL).
func (s *Server) Card(endpoint string) AgentCard {
	return AgentCard{
		Name: "planwright",
		Description: "Plans and runs multi-step work with LLM agents: a planner answers, or writes a plan whose steps " +
			"executor agents carry out. A task is a run; its contextId is a chat session that later messages continue.",
		SupportedInterfaces: []AgentInterface{{URL: endpoint, ProtocolBinding: "JSONRPC", ProtocolVersion: ProtocolVersion}},
		Version:             s.cfg.Version,
		Capabilities:        AgentCapabilities{Streaming: true, PushNotifications: false},
		SecuritySchemes: map[string]SecurityScheme{"bearer": {HTTPAuthSecurityScheme: &HTTPAuthSecurityScheme{
			Scheme: "Bearer", BearerFormat: "planwright API key", Description: "A planwright API key: Authorization: Bearer <key>"}}},
		SecurityRequirements: []SecurityRequirement{{Schemes: map[string]StringList{"bearer": {List: []string{}}}}},
		DefaultInputModes:    []string{"text/plain"},
		DefaultOutputModes:   []string{"text/plain", "application/json"},
		Skills: []AgentSkill{{
			ID:   "plan-and-execute",
			Name: "Plan and execute",
			Description: "Answers a request, or plans it as steps and runs them. metadata.plan_mode chooses auto_execute, " +
				"draft_only (the plan waits for a person's review: input required) or agent_review. The answer is a text " +
				"artifact, the plan a data artifact (application/json).",
			Tags:        []string{"planning", "agents", "tasks"},
			Examples:    []string{"Plan the launch of our new product and carry it out.", "What changed in the last release?"},
			InputModes:  []string{"text/plain"},
			OutputModes: []string{"text/plain", "application/json"},
		}},
	}
}

// CardHandler serves the agent card (GET, no authentication: the card
// says how to authenticate). The endpoint is Config.URL, or else this
// request's scheme and host with Config.Path.
func (s *Server) CardHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		endpoint := s.cfg.URL
		if endpoint == "" {
			scheme := "http"
			if r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https") {
				scheme = "https"
			}
			endpoint = scheme + "://" + r.Host + s.cfg.Path
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "public, max-age=300")
		_ = json.NewEncoder(w).Encode(s.Card(endpoint))
	})
}
