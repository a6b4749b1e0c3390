package api

import (
	"strconv"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
)

// idFilter is one optional id query parameter of a list route.
type idFilter struct {
	name string
	dst  **uuid.UUID
}

// listQuery reads the query a filtered list route shares: an optional state of the
// enumeration states, optional id filters, and a limit between 1 and max (def when
// absent). Every bad parameter is reported at once.
func listQuery[S ~string](c *gin.Context, states domain.Enum[S], state **S, ids []idFilter, limit *int, def, max int) error {
	var v domain.Validations
	if raw := c.Query("state"); raw != "" {
		s, err := states.Parse(raw)
		if err != nil {
			v.AddErr("state", err)
		} else {
			*state = &s
		}
	}
	for _, q := range ids {
		if raw := c.Query(q.name); raw != "" {
			id, err := domain.ParseID(q.name, raw)
			if err != nil {
				v.AddErr(q.name, err)
				continue
			}
			*q.dst = &id
		}
	}
	*limit = def
	if l := c.Query("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > max {
			v.Add("limit", "must be between 1 and "+strconv.Itoa(max))
		}
		*limit = n
	}
	return v.Err()
}
