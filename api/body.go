package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"sort"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/jam-dev/jam/internal/domain"
)

// maxBodyBytes bounds every request body; Jam's requests are small documents.
const maxBodyBytes = 1 << 20

// validator is implemented by request bodies that check their own fields.
type validator interface{ Validate() error }

// decodeJSON reads exactly one JSON object into dst, refusing unknown fields, other media
// types, oversized bodies and trailing data, then runs dst's own validation.
func decodeJSON(c *gin.Context, dst any) error {
	if ct := c.GetHeader("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return &Error{Status: http.StatusUnsupportedMediaType, Code: domain.CodeUnsupportedMedia, Message: "the body must be application/json"}
		}
	}
	dec := json.NewDecoder(http.MaxBytesReader(c.Writer, c.Request.Body, maxBodyBytes))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return bodyError(err)
	}
	if err := dec.Decode(&struct{}{}); !errors.Is(err, io.EOF) {
		return &Error{Status: http.StatusBadRequest, Code: domain.CodeMalformedBody, Message: "the body must hold exactly one JSON object"}
	}
	var vs domain.Validations
	unknownFields(reflect.TypeOf(dst), raw, "", &vs)
	if len(vs) > 0 {
		return validationError(vs)
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return bodyError(err)
	}
	if v, ok := dst.(validator); ok {
		return v.Validate()
	}
	return nil
}

func bodyError(err error) error {
	var (
		syntax    *json.SyntaxError
		typeErr   *json.UnmarshalTypeError
		maxBytes  *http.MaxBytesError
		validErr  *domain.ValidationError
		validErrs domain.Validations
	)
	switch {
	case errors.Is(err, io.EOF):
		return &Error{Status: http.StatusBadRequest, Code: domain.CodeMalformedBody, Message: "the body is empty; a JSON object is required"}
	case errors.As(err, &maxBytes):
		return &Error{Status: http.StatusRequestEntityTooLarge, Code: domain.CodeTooLarge, Message: fmt.Sprintf("the body exceeds %d bytes", maxBodyBytes)}
	case errors.As(err, &syntax), errors.Is(err, io.ErrUnexpectedEOF):
		return &Error{Status: http.StatusBadRequest, Code: domain.CodeMalformedBody, Message: "the body is not valid JSON", Cause: err}
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			return &Error{Status: http.StatusBadRequest, Code: domain.CodeMalformedBody, Message: "the body must be a JSON object", Cause: err}
		}
		return validationError(domain.Validations{{Field: field, Detail: "must be " + jsonKind(typeErr.Type.Kind().String())}})
	case errors.As(err, &validErr), errors.As(err, &validErrs):
		// An enum's UnmarshalText refused a value.
		vs, _ := domain.AsValidations(err)
		return validationError(vs)
	}
	return &Error{Status: http.StatusBadRequest, Code: domain.CodeMalformedBody, Message: "the body could not be read", Cause: err}
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "slice", "array":
		return "an array"
	case "map", "struct":
		return "an object"
	default:
		return "a number"
	}
}

// unknownFields reports every key of a JSON object (and of the objects nested in it) that
// the destination struct does not declare. encoding/json reports only the first unknown
// field, and only as text; a client should see all of them, each as a validation.
func unknownFields(t reflect.Type, raw json.RawMessage, prefix string, vs *domain.Validations) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return // not an object: json.Unmarshal reports the type mismatch
	}
	fields := map[string]reflect.Type{}
	jsonFields(t, fields)
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		ft, ok := fields[k]
		if !ok {
			vs.Add(prefix+k, "unknown field")
			continue
		}
		unknownFields(ft, obj[k], prefix+k+".", vs)
	}
}

// jsonFields collects the JSON names of a struct's fields, with those of embedded structs
// promoted as encoding/json promotes them.
func jsonFields(t reflect.Type, fields map[string]reflect.Type) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			jsonFields(f.Type, fields)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fields[name] = f.Type
	}
}

// decodeOptionalJSON is decodeJSON for routes whose body may be left out entirely.
func decodeOptionalJSON(c *gin.Context, dst any) error {
	if c.Request.ContentLength == 0 {
		return nil
	}
	return decodeJSON(c, dst)
}
