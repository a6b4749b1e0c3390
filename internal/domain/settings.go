package domain

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
)

var commandNamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// Setting describes one operator setting: its key, what it means, its default and how a value
// is validated. Settings are stored as JSON text under their key.
type Setting struct {
	Key         string
	Description string
	Default     json.RawMessage
	validate    func(json.RawMessage) error
}

// Validate checks a candidate JSON value for this setting.
func (s Setting) Validate(value json.RawMessage) error { return s.validate(value) }

// SettingIdleSecs is the idle-reap threshold used when JAM_OWNED_RUNTIME_IDLE_SECS is unset.
const SettingIdleSecs = "runtime.defaults.idle_secs"

// SettingPermissionTimeoutSecs bounds how long a runtime permission request waits for a
// decision when JAM_RUNTIME_PERMISSION_TIMEOUT_SECS is unset; 0 waits indefinitely.
const SettingPermissionTimeoutSecs = "runtime.permission.timeout_secs"

// SettingProviderExecutables is the machine pin table: command name -> absolute path.
const SettingProviderExecutables = "runtime.defaults.provider_executables"

var settings = map[string]Setting{
	SettingPermissionTimeoutSecs: {
		Key:         SettingPermissionTimeoutSecs,
		Description: "Seconds a runtime permission request waits for a decision before it is denied; 0 waits indefinitely (JAM_RUNTIME_PERMISSION_TIMEOUT_SECS overrides it).",
		Default:     json.RawMessage(`0`),
		validate:    intRange(0, 7*24*3600),
	},
	SettingProviderExecutables: {
		Key:         SettingProviderExecutables,
		Description: "Pinned provider executables by command name, e.g. {\"opencode\": \"/opt/opencode/bin/opencode\"}; each path clean and absolute like a template's command, and verified like one when a runtime starts; consulted after an explicit template command and the environment default.",
		Default:     json.RawMessage(`{}`),
		validate:    executablePins,
	},
	SettingMaxAgentHops: {
		Key:         SettingMaxAgentHops,
		Description: "Agent hops after a human message past which an agent's message wakes no one: it stays in the transcript and reaches the agents as context with their next turn.",
		Default:     json.RawMessage(`6`),
		validate:    intRange(1, 1000),
	},
	SettingQuestionTimeoutSecs: {
		Key:         SettingQuestionTimeoutSecs,
		Description: "Seconds a runtime's question to a human waits for an answer when neither the question nor its agent sets one (JAM_QUESTION_TIMEOUT_SECS overrides it); 0 waits indefinitely. No answer means the agent proceeds without one.",
		Default:     json.RawMessage(`900`),
		validate:    intRange(0, MaxQuestionTimeoutSecs),
	},
	SettingWatchdog: {
		Key:         SettingWatchdog,
		Description: "The provider watchdog's defaults (a template's watchdog fields override each): memory_mb, the resident-memory ceiling of the provider's process group; idle_cpu_percent, its CPU ceiling sustained for a minute with no turn running; wedge_secs, how long a turn may go without a provider event. 0 turns a bound off. Crossing one recycles the runtime on its own thread.",
		Default:     json.RawMessage(`{"memory_mb":4096,"idle_cpu_percent":90,"wedge_secs":1800}`),
		validate:    validateWatchdogSetting,
	},
	SettingIdleSecs: {
		Key:         SettingIdleSecs,
		Description: "Seconds an owned runtime may sit idle before it is stopped (JAM_OWNED_RUNTIME_IDLE_SECS overrides it).",
		Default:     json.RawMessage(`600`),
		validate:    intRange(1, 7*24*3600),
	},
}

// LookupSetting returns the setting registered under key.
func LookupSetting(key string) (Setting, bool) {
	s, ok := settings[key]
	return s, ok
}

// Settings lists every registered setting ordered by key.
func Settings() []Setting {
	out := make([]Setting, 0, len(settings))
	for _, s := range settings {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

func intRange(lo, hi int64) func(json.RawMessage) error {
	return func(raw json.RawMessage) error {
		var n int64
		if err := json.Unmarshal(raw, &n); err != nil {
			return &ValidationError{Field: "value", Detail: "must be an integer"}
		}
		if n < lo || n > hi {
			return &ValidationError{Field: "value", Detail: fmt.Sprintf("must be between %d and %d", lo, hi)}
		}
		return nil
	}
}

// ValidateCommandName checks a catalog command name as the pin table keys it (e.g.
// "opencode", "jam-testagent").
func ValidateCommandName(name string) error {
	if !commandNamePattern.MatchString(name) {
		return &ValidationError{Field: "name", Detail: "not a command name: 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"}
	}
	return nil
}

// executablePins validates the pin table: each key a command name, each path what a
// template's command may be (ValidateExecutablePath). Every bad pin is reported under
// value.<command>.
func executablePins(raw json.RawMessage) error {
	var pins map[string]string
	if err := json.Unmarshal(raw, &pins); err != nil {
		return &ValidationError{Field: "value", Detail: "must be an object of command name to absolute path"}
	}
	names := make([]string, 0, len(pins))
	for name := range pins {
		names = append(names, name)
	}
	sort.Strings(names)
	var v Validations
	for _, name := range names {
		field := "value." + name
		if err := ValidateCommandName(name); err != nil {
			v.AddErr(field, err)
		}
		if err := ValidateExecutablePath(pins[name]); err != nil {
			v.AddErr(field, err)
		}
	}
	return v.Err()
}
