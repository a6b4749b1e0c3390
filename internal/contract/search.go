package contract

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
)

// Search attributes Jam sets on its workflows, so the Temporal Web UI and `temporal workflow
// list --query "JamRoom='…'"` find the workflows of an agent, room, host, workspace or
// template. All are keywords: exact-match ids and names.
var (
	SearchAgent     = temporal.NewSearchAttributeKeyKeyword("JamAgent")
	SearchRoom      = temporal.NewSearchAttributeKeyKeyword("JamRoom")
	SearchHost      = temporal.NewSearchAttributeKeyKeyword("JamHost")
	SearchWorkspace = temporal.NewSearchAttributeKeyKeyword("JamWorkspace")
	SearchTemplate  = temporal.NewSearchAttributeKeyKeyword("JamTemplate")
	// SearchKind is the workflow type (RoomSession, RuntimeHost, WorkspaceOp, Reconcile…).
	SearchKind = temporal.NewSearchAttributeKeyKeyword("JamKind")
	// SearchStage is where the workflow is now (a session's phase, a host's state, an
	// operation's step), upserted as it moves.
	SearchStage = temporal.NewSearchAttributeKeyKeyword("JamStage")
)

// SearchAttributeKeys are every search attribute Jam uses, in registration order.
func SearchAttributeKeys() []temporal.SearchAttributeKeyKeyword {
	return []temporal.SearchAttributeKeyKeyword{SearchAgent, SearchRoom, SearchHost, SearchWorkspace, SearchTemplate,
		SearchKind, SearchStage}
}

// SearchAttributeNames are the names of SearchAttributeKeys.
func SearchAttributeNames() []string {
	keys := SearchAttributeKeys()
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = k.GetName()
	}
	return names
}

// Tags are the Jam objects a workflow serves; zero ids are left out.
type Tags struct {
	Agent, Room, Host, Workspace, Template uuid.UUID
}

// Tagged inputs say which Jam objects their workflow serves.
type Tagged interface{ SearchTags() Tags }

// Updates are the tags as search attribute updates, with the workflow's kind.
func (t Tags) Updates(kind string) []temporal.SearchAttributeUpdate {
	up := []temporal.SearchAttributeUpdate{SearchKind.ValueSet(kind)}
	for _, kv := range []struct {
		key temporal.SearchAttributeKeyKeyword
		id  uuid.UUID
	}{{SearchAgent, t.Agent}, {SearchRoom, t.Room}, {SearchHost, t.Host}, {SearchWorkspace, t.Workspace}, {SearchTemplate, t.Template}} {
		if kv.id != uuid.Nil {
			up = append(up, kv.key.ValueSet(kv.id.String()))
		}
	}
	return up
}

// Attributes are the tags as a workflow's start search attributes.
func (t Tags) Attributes(kind string) temporal.SearchAttributes {
	return temporal.NewSearchAttributes(t.Updates(kind)...)
}

// Summary is a one-line description of the workflow for the Web UI: its kind and objects.
func (t Tags) Summary(kind string) string {
	parts := []string{kind}
	for _, kv := range []struct {
		name string
		id   uuid.UUID
	}{{"room", t.Room}, {"agent", t.Agent}, {"host", t.Host}, {"workspace", t.Workspace}, {"template", t.Template}} {
		if kv.id != uuid.Nil {
			parts = append(parts, kv.name+" "+kv.id.String())
		}
	}
	return strings.Join(parts, " · ")
}

func (in RoomSessionInput) SearchTags() Tags        { return Tags{Agent: in.AgentID, Room: in.RoomID} }
func (in RuntimeHostInput) SearchTags() Tags        { return Tags{Host: in.Host} }
func (in TemplateApplyInput) SearchTags() Tags      { return Tags{Template: in.Template} }
func (in WorkspaceOpInput) SearchTags() Tags        { return Tags{Workspace: in.Workspace} }
func (in HostCleanupInput) SearchTags() Tags        { return Tags{Host: in.Host} }
func (in ContinuityResetInput) SearchTags() Tags    { return Tags{Host: in.Host} }
func (in CheckpointDeletionInput) SearchTags() Tags { return Tags{Host: in.Host} }
func (in HostProbeInput) SearchTags() Tags          { return Tags{Host: in.Host} }

// TaggedStart is a start of typ with input in, given the search attributes and the Web UI
// summary of the Jam objects it serves.
func TaggedStart(o client.StartWorkflowOptions, typ string, in any) client.StartWorkflowOptions {
	var t Tags
	if tg, ok := in.(Tagged); ok {
		t = tg.SearchTags()
	}
	o.TypedSearchAttributes = t.Attributes(typ)
	o.StaticSummary = t.Summary(typ)
	return o
}

// ErrSearchAttributesMissing: the Temporal namespace lacks Jam's search attributes.
type ErrSearchAttributesMissing struct {
	Namespace string
	Missing   []string
}

func (e *ErrSearchAttributesMissing) Error() string {
	cmds := make([]string, 0, len(e.Missing))
	for _, name := range e.Missing {
		cmds = append(cmds, fmt.Sprintf("temporal operator search-attribute create --namespace %s --name %s --type Keyword", e.Namespace, name))
	}
	return fmt.Sprintf("Temporal namespace %q lacks Jam's search attributes %s; create them with `jam migrate temporal`, or:\n  %s",
		e.Namespace, strings.Join(e.Missing, ", "), strings.Join(cmds, "\n  "))
}

// EnsureSearchAttributes checks that the namespace has Jam's search attributes as keywords;
// with create it adds the missing ones. Without create, a missing one is an
// *ErrSearchAttributesMissing naming the command that creates it: a workflow that sets an
// attribute the namespace lacks fails every task.
func EnsureSearchAttributes(ctx context.Context, c client.Client, namespace string, create bool) error {
	have, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return fmt.Errorf("list search attributes of namespace %s: %w", namespace, err)
	}
	var missing []string
	add := map[string]enumspb.IndexedValueType{}
	for _, k := range SearchAttributeKeys() {
		name := k.GetName()
		t, ok := have.GetCustomAttributes()[name]
		if !ok {
			t, ok = have.GetSystemAttributes()[name]
		}
		switch {
		case !ok:
			missing = append(missing, name)
			add[name] = enumspb.INDEXED_VALUE_TYPE_KEYWORD
		case t != enumspb.INDEXED_VALUE_TYPE_KEYWORD:
			return fmt.Errorf("search attribute %s of namespace %s is %s, Jam needs Keyword", name, namespace, t)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	slices.Sort(missing)
	if !create {
		return &ErrSearchAttributesMissing{Namespace: namespace, Missing: missing}
	}
	if _, err := c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace: namespace, SearchAttributes: add}); err != nil {
		return fmt.Errorf("create search attributes %s in namespace %s: %w", strings.Join(missing, ", "), namespace, err)
	}
	return awaitSearchAttributes(ctx, c, namespace)
}

// awaitSearchAttributes waits until the frontends know the new attributes (they learn them
// through their namespace cache, refreshed every 10 s by default): until then a start that
// sets one is refused.
func awaitSearchAttributes(ctx context.Context, c client.Client, namespace string) error {
	clauses := make([]string, 0, len(SearchAttributeKeys()))
	for _, name := range SearchAttributeNames() {
		clauses = append(clauses, name+" = 'x'")
	}
	req := &workflowservice.ListWorkflowExecutionsRequest{Namespace: namespace, Query: strings.Join(clauses, " AND "), PageSize: 1}
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		_, err := c.ListWorkflow(ctx, req)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("search attributes of namespace %s created but not yet in effect: %w", namespace, err)
		case <-t.C:
		}
	}
}
