// Package configs embeds the shipped role and context files, so a binary
// run outside the repository still has them when its configuration points
// at the default paths.
package configs

import _ "embed"

// Agents is configs/agents.yaml.
//
//go:embed agents.yaml
var Agents []byte

// Contexts is configs/contexts.yaml.
//
//go:embed contexts.yaml
var Contexts []byte

// Default paths of the files, as the configuration names them.
const (
	AgentsPath   = "configs/agents.yaml"
	ContextsPath = "configs/contexts.yaml"
)
