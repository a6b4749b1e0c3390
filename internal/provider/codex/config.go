package codex

import (
	"strings"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/provider"
)

// Defaults of a thread Jam starts when the template does not say.
const (
	defaultApprovalPolicy = "on-request"
	defaultSandboxMode    = "workspace-write"
	// providerID names the model provider a template configures, in Codex's config.
	providerID = "jam"
)

// jamRules tell Codex how it works in a room; the per-turn envelope repeats the part about
// settling each message.
const jamRules = `## Working in a Jam room
You are an agent in a chat room, run by Jam. Each turn brings one or more room messages, each in a block with its id and author. Settle every message with a tool: jam_reply_to_message {message_id, text} posts your answer to the room as a reply to that message; jam_no_reply {message_id, reason} settles it without an answer. Only these tools reach the room; your final assistant text does not. Answer messages from other agents only when they need an answer, so agents do not talk in circles. Jam's other tools: jam_send_message {text} posts a new room message, jam_room_context reads the room (participants with ids, recent messages), jam_ask_question {question, recipient_id?} asks a human and waits for the answer.`

// threadParams are the thread/start (and thread/resume) parameters: working directory,
// approval and sandbox policy, Jam's instructions and settlement tools, and the model and
// model provider the template configures, as config overrides.
func (r *Runtime) threadParams() map[string]any {
	set := r.Spec.Settings
	p := map[string]any{
		"cwd":                   r.Spec.Dir,
		"approvalPolicy":        orDefault(set[domain.SettingKeyApprovalPolicy], defaultApprovalPolicy),
		"sandbox":               orDefault(set[domain.SettingKeySandboxMode], defaultSandboxMode),
		"developerInstructions": r.instructions(),
		"dynamicTools":          r.Tools.Specs(),
	}
	if m := set[domain.SettingKeyModel]; m != "" {
		p["model"] = m
	}
	if cfg := configOverrides(set); len(cfg) > 0 {
		p["config"] = cfg
	}
	return p
}

// configOverrides are the template's settings as Codex config keys: the reasoning effort,
// and a model provider (base URL, wire API, the variable holding its key) that replaces the
// default OpenAI one, so an agent can use another OpenAI-compatible endpoint or a local
// model server.
func configOverrides(set map[string]string) map[string]any {
	cfg := map[string]any{}
	if e := set[domain.SettingKeyReasoningEffort]; e != "" {
		cfg["model_reasoning_effort"] = e
	}
	if base := set[domain.SettingKeyProviderBaseURL]; base != "" {
		mp := map[string]any{"name": providerID, "base_url": base,
			"wire_api": orDefault(set[domain.SettingKeyProviderWireAPI], "responses")}
		if k := set[domain.SettingKeyProviderEnvKey]; k != "" {
			mp["env_key"] = k
		}
		cfg["model_provider"] = providerID
		cfg["model_providers."+providerID] = mp
	}
	return cfg
}

// instructions are the developer instructions of the thread: the operator's briefing and
// the room, then how to work in it.
func (r *Runtime) instructions() string {
	pre := provider.Preamble(r.Spec.Briefing, r.Spec.Roster)
	if pre == "" {
		return jamRules
	}
	return strings.TrimSpace(pre) + "\n\n" + jamRules
}

func orDefault(v, d string) string {
	if v == "" {
		return d
	}
	return v
}
