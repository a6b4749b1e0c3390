package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/store"
)

// Event stream bounds.
const (
	// streamBuffer is how many events a client may fall behind before it is disconnected;
	// it reconnects with Last-Event-ID and resumes from the log.
	streamBuffer = 1024
	// streamWriteTimeout bounds one write to a client that stopped reading.
	streamWriteTimeout = 10 * time.Second
	streamKeepAlive    = 15 * time.Second
	streamReplayPage   = 500
)

// EventBody is one server-sent event's data.
type EventBody struct {
	ID        int64            `json:"id"`
	Kind      domain.EventKind `json:"kind"`
	RoomID    *uuid.UUID       `json:"room_id,omitempty"`
	AgentID   *uuid.UUID       `json:"agent_id,omitempty"`
	CreatedAt time.Time        `json:"created_at"`
	Payload   json.RawMessage  `json:"payload"`
}

// streamEvents serves GET /v1/events as server-sent events. A client resumes with the
// Last-Event-ID header (or ?after=) and gets every event after it exactly once: the stream
// subscribes first, replays the log from the store, then forwards live events it has not
// sent. A client whose buffer fills is told so and disconnected.
func (s *Server) streamEvents(c *gin.Context) error {
	var (
		f store.EventFilter
		v domain.Validations
	)
	for name, dst := range map[string]**uuid.UUID{"room": &f.Room, "agent": &f.Agent} {
		if raw := c.Query(name); raw != "" {
			id, err := domain.ParseID(name, raw)
			if err != nil {
				v.AddErr(name, err)
				continue
			}
			*dst = &id
		}
	}
	resumeFrom := c.GetHeader("Last-Event-ID")
	if resumeFrom == "" {
		resumeFrom = c.Query("after")
	}
	after := int64(-1)
	if resumeFrom != "" {
		n, err := strconv.ParseInt(resumeFrom, 10, 64)
		if err != nil || n < 0 {
			v.Add("Last-Event-ID", "must be the id of an event")
		}
		after = n
	}
	if err := v.Err(); err != nil {
		return err
	}
	sub := s.cfg.Band.Subscribe(f, streamBuffer)
	defer sub.Close()
	oldest, newest, err := s.cfg.Store.EventBounds(c.Request.Context())
	if err != nil {
		return err
	}
	reset := false
	switch {
	case after < 0:
		after = newest // a new stream starts now
	case after > newest:
		// An id from a log that no longer exists (a reset database): start over from now.
		after, reset = newest, true
	}

	h := c.Writer.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	c.Status(http.StatusOK)
	w := &sseWriter{c: c, rc: http.NewResponseController(c.Writer)}
	if reset {
		w.send(string(domain.StreamReset), fmt.Sprintf(`{"last_event_id":%d}`, after), "")
	} else if after+1 < oldest {
		// Events between the client's id and the oldest retained one were pruned.
		w.send(string(domain.StreamGap), fmt.Sprintf(`{"missed_before":%d}`, oldest), "")
	}
	// The first frame carries the stream's position, so a client that loses the connection
	// before any event arrives still resumes from here, not from a later "now".
	pos := strconv.FormatInt(after, 10)
	w.send(string(domain.StreamOpen), fmt.Sprintf(`{"last_event_id":%d}`, after), pos)
	for {
		evs, err := s.cfg.Store.ListEvents(c.Request.Context(), after, f, streamReplayPage)
		if err != nil {
			s.log.Warn("event replay failed", "request_id", requestID(c), "error", err)
			return nil
		}
		for _, e := range evs {
			if !w.event(e) {
				return nil
			}
			after = e.ID
		}
		if len(evs) < streamReplayPage {
			break
		}
	}
	keepAlive := time.NewTicker(streamKeepAlive)
	defer keepAlive.Stop()
	for {
		select {
		case <-c.Request.Context().Done():
			return nil
		case <-keepAlive.C:
			if !w.comment("keep-alive") {
				return nil
			}
		case e, ok := <-sub.C:
			if !ok {
				if sub.Overflowed() {
					w.send(string(domain.StreamOverflow), fmt.Sprintf(`{"last_event_id":%d}`, after), "")
				}
				return nil
			}
			if e.ID <= after {
				continue // already replayed
			}
			if !w.event(e) {
				return nil
			}
			after = e.ID
		}
	}
}

// sseWriter writes server-sent events with a deadline per write, so a client that stops
// reading costs a bounded wait, never unbounded memory.
type sseWriter struct {
	c      *gin.Context
	rc     *http.ResponseController
	broken bool
}

func (w *sseWriter) event(e domain.Event) bool {
	data, err := json.Marshal(EventBody{ID: e.ID, Kind: e.Kind, RoomID: e.RoomID, AgentID: e.AgentID, CreatedAt: e.CreatedAt, Payload: e.Payload})
	if err != nil {
		return false
	}
	return w.send(string(e.Kind), string(data), strconv.FormatInt(e.ID, 10))
}

func (w *sseWriter) send(kind, data, id string) bool {
	frame := ""
	if id != "" {
		frame += "id: " + id + "\n"
	}
	frame += "event: " + kind + "\ndata: " + data + "\n\n"
	return w.write(frame)
}

func (w *sseWriter) comment(text string) bool { return w.write(": " + text + "\n\n") }

func (w *sseWriter) write(frame string) bool {
	if w.broken {
		return false
	}
	_ = w.rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
	if _, err := w.c.Writer.WriteString(frame); err != nil {
		w.broken = true
		return false
	}
	if err := w.rc.Flush(); err != nil {
		w.broken = true
		return false
	}
	return true
}
