package domain

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"sort"
)

// compatibilityTag versions the fingerprint: a change of its inputs changes the tag.
const compatibilityTag = "jam.runtime-host-compatibility.v1"

// hostInputs are the host-wide inputs of a runtime: two rooms may share a runtime host only
// when they agree on every one. Session-local values (workspace, thread settings, the
// template's alias) are left out so rooms can differ in them and still share.
type hostInputs struct {
	Tag            string              `json:"tag"`
	Transport      Transport           `json:"transport"`
	Command        string              `json:"command"`
	Args           []string            `json:"args"`
	EnvAllowlist   []string            `json:"env_allowlist"`
	AuthMode       AuthMode            `json:"auth_mode"`
	RuntimeVersion string              `json:"runtime_version"`
	Sandboxed      bool                `json:"sandboxed"`
	ConfigSource   ConfigurationSource `json:"configuration_source"`
	DockerFiles    []string            `json:"docker_files"`
	Settings       [][2]string         `json:"settings"`
	NetworkProfile NetworkProfile      `json:"network_profile"`
}

// CompatibilityFingerprint is the SHA-256, under a domain tag, of a runtime's host-wide
// inputs after normalization — with the RESOLVED network profile, so a host recreated with a
// Production fingerprint accepts the next Production bind (the reference hard-coded Developer
// at allocation; that defect is not copied). runtimeVersion is the provider's version, "" when
// not known.
func CompatibilityFingerprint(c TemplateConfig, runtimeVersion string) string {
	n := c.Normalized()
	in := hostInputs{Tag: compatibilityTag, Transport: n.Transport, Command: n.Command, Args: n.Args,
		EnvAllowlist: slices.Sorted(slices.Values(n.EnvAllowlist)), AuthMode: n.AuthMode,
		RuntimeVersion: runtimeVersion, Sandboxed: n.Sandbox.Enabled, NetworkProfile: n.NetworkProfile,
		Settings: [][2]string{}, DockerFiles: []string{}}
	if n.Sandbox.Enabled {
		in.ConfigSource = n.Sandbox.ConfigurationSource
		in.DockerFiles = slices.Sorted(slices.Values(n.Sandbox.Files))
	}
	keys := make([]string, 0, len(n.Settings))
	for k := range n.Settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		in.Settings = append(in.Settings, [2]string{k, n.Settings[k]})
	}
	b, _ := json.Marshal(in)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
