package api

import (
	_ "embed"
	"net/http"

	"github.com/gin-gonic/gin"
)

// openAPIDocument is hand-kept beside the router; a test holds the two equal route for route.
//
//go:embed openapi.json
var openAPIDocument []byte

// OpenAPIDocument returns the API description served at /v1/openapi.json.
func OpenAPIDocument() []byte { return openAPIDocument }

func (s *Server) openAPI(c *gin.Context) error {
	c.Data(http.StatusOK, "application/json", openAPIDocument)
	return nil
}
