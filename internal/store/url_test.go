package store

import (
	"strings"
	"testing"

	"github.com/jam-dev/jam/schema"
)

func TestParseURLChoosesTheDialect(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in      string
		dialect schema.Dialect
		path    string
	}{
		{"postgres://jam@db:5432/jam?sslmode=disable", schema.Postgres, ""},
		{"postgresql://jam@db/jam", schema.Postgres, ""},
		{"sqlite:/var/lib/jam/jam.db", schema.SQLite, "/var/lib/jam/jam.db"},
		{"sqlite:///var/lib/jam/jam.db", schema.SQLite, "/var/lib/jam/jam.db"},
		{"sqlite:relative.db", schema.SQLite, "relative.db"},
	}
	for _, c := range cases {
		got, err := ParseURL(c.in)
		if err != nil || got.Dialect != c.dialect || got.Path != c.path {
			t.Errorf("%s: %+v %v", c.in, got, err)
		}
		if c.dialect == schema.SQLite && (!strings.Contains(got.DSN, "foreign_keys") || !strings.Contains(got.DSN, "_txlock=immediate")) {
			t.Errorf("%s: DSN %s lacks Jam's pragmas", c.in, got.DSN)
		}
	}
	for _, bad := range []string{"", "mysql://x", "/plain/path.db", "sqlite:", "sqlite:/x.db?mode=memory"} {
		if _, err := ParseURL(bad); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}
