package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/store"
)

// SettingBody is one registered setting with its stored value, if any.
type SettingBody struct {
	Key         string          `json:"key"`
	Description string          `json:"description"`
	Default     json.RawMessage `json:"default"`
	// Value is the stored value, or null when the default applies.
	Value     json.RawMessage `json:"value"`
	UpdatedAt *time.Time      `json:"updated_at"`
}

// SettingList is the body of GET /v1/settings.
type SettingList struct {
	Items []SettingBody `json:"items"`
}

// PutSettingRequest is the body of PUT /v1/settings/{key}.
type PutSettingRequest struct {
	Value json.RawMessage `json:"value"`
}

// Validate requires a value; null is not a value.
func (r PutSettingRequest) Validate() error {
	if len(r.Value) == 0 || string(r.Value) == "null" {
		return &domain.ValidationError{Field: "value", Detail: "required"}
	}
	return nil
}

func settingBody(def domain.Setting, stored *store.SettingValue) SettingBody {
	b := SettingBody{Key: def.Key, Description: def.Description, Default: def.Default, Value: json.RawMessage("null")}
	if stored != nil {
		at := stored.UpdatedAt
		b.Value, b.UpdatedAt = stored.Value, &at
	}
	return b
}

func (s *Server) listSettings(c *gin.Context) error {
	stored, err := s.cfg.Store.ListSettings(c.Request.Context())
	if err != nil {
		return err
	}
	byKey := make(map[string]*store.SettingValue, len(stored))
	for i := range stored {
		byKey[stored[i].Key] = &stored[i]
	}
	out := SettingList{Items: []SettingBody{}}
	for _, def := range domain.Settings() {
		out.Items = append(out.Items, settingBody(def, byKey[def.Key]))
	}
	c.JSON(http.StatusOK, out)
	return nil
}

func settingParam(c *gin.Context) (domain.Setting, error) {
	def, ok := domain.LookupSetting(c.Param("key"))
	if !ok {
		return domain.Setting{}, notFound("setting", nil)
	}
	return def, nil
}

func (s *Server) getSetting(c *gin.Context) error {
	def, err := settingParam(c)
	if err != nil {
		return err
	}
	stored, err := s.cfg.Store.GetSetting(c.Request.Context(), def.Key)
	switch {
	case errors.Is(err, store.ErrNotFound):
		c.JSON(http.StatusOK, settingBody(def, nil))
		return nil
	case err != nil:
		return err
	}
	c.JSON(http.StatusOK, settingBody(def, &stored))
	return nil
}

func (s *Server) putSetting(c *gin.Context) error {
	def, err := settingParam(c)
	if err != nil {
		return err
	}
	var req PutSettingRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if err := s.cfg.Store.PutSetting(c.Request.Context(), def.Key, req.Value, time.Now()); err != nil {
		return err
	}
	return s.getSetting(c)
}
