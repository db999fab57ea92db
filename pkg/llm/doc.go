// Package llm is planwright's model layer: it builds langchaingo llms.Models
// from configuration (NewProvider: langchaingo's openai, for OpenAI and
// OpenAI-compatible servers, and anthropic; googleai is planwright's own
// model speaking the Gemini REST API, googleai.go, which spares the binary
// langchaingo's Google SDK, gRPC and their memory; the scripted and demo
// models live in sub-packages and cmd wires them) and adapts a model call
// into typed stream parts (Client), so that no other package sees
// langchaingo.
//
// The Client owns everything between a Request and the provider's wire:
//
//   - conversion: messages, tool calls and tool results become langchaingo
//     MessageContent in the shape each provider's langchaingo code reads
//     (convert.go, anthropic.go);
//   - tool names: "server.tool" and other names providers refuse are
//     mapped to ^[a-zA-Z0-9_-]{1,64}$ for one call and back (names.go);
//   - streaming: text reaches onPart as TextDelta; the openai provider's
//     tool-call deltas, passed to the same callback as JSON, never do
//     (stream.go); tool calls are gathered from every choice and reported
//     complete after the text;
//   - usage: read from the provider or estimated (usage.go);
//   - failures: 429, 5xx and attempt timeouts are retried with backoff and
//     jitter, honouring Retry-After, which the transport NewProvider
//     installs records (retry.go, transport.go); an attempt that already
//     streamed text is never retried; a stream cut before its end marker
//     or carrying a malformed chunk fails the attempt (fault.go).
//
// Known langchaingo v0.1.14 quirks it works around, each tested against the
// scripted peers of package llmtest: openai passes tool-call deltas to the
// streaming callback and ignores their index; anthropic streams only text,
// makes a choice per content block, reads only the first part of an
// assistant or tool message (the Client sends one part per message and the
// anthropic transport joins consecutive same-role messages on the wire),
// and the API refuses tool blocks in a request without tools (such history
// is written as text).
package llm
