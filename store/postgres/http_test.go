package postgres_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	leafhttp "github.com/leafd/leafd/http"
	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/store"
)

// A store that refuses the login, or whose database does not exist, shows
// why in /api/state without PostgreSQL's role or database name, whichever
// form the DSN takes: the server's messages and pgx's quote them, and
// leafd's own advice names the database to create. /api/state is open to
// anyone unless admin.protect_dashboard is set.
func TestStateHidesPostgresNames(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(testdb.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	role := *u
	role.User = url.UserPassword("leafd_no_such_role", "wrong-password")
	host, port, _ := net.SplitHostPort(u.Host)
	for _, c := range []struct {
		name, dsn, says string
		hidden          []string
	}{
		{"URLRole", role.String(), "refused the login", []string{"leafd_no_such_role", "wrong-password", strings.TrimPrefix(u.Path, "/")}},
		{"KeywordValueDatabase", fmt.Sprintf("host = %s port = %s user = %s dbname = leafd_no_such_db sslmode = disable", host, port, u.User.Username()),
			"does not exist", []string{"leafd_no_such_db", "user=" + u.User.Username()}},
		{"KeywordValueQuoted", fmt.Sprintf("host=%s port=%s user=%s dbname='Leafd No Such Db' sslmode=disable", host, port, u.User.Username()),
			"does not exist", []string{"Leafd No Such Db", "user=" + u.User.Username()}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := store.Open("postgres", c.dsn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			srv := httptest.NewServer(leafhttp.New(leafhttp.Config{Store: s}).Handler())
			t.Cleanup(srv.Close)
			res, err := http.Get(srv.URL + "/api/state")
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			b, err := io.ReadAll(res.Body)
			if err != nil {
				t.Fatal(err)
			}
			body := string(b)
			if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
				t.Fatalf("GET /api/state = %d %q %s", res.StatusCode, res.Header.Get("Content-Type"), body)
			}
			var st struct {
				Store *struct {
					OK    bool   `json:"ok"`
					Error string `json:"error"`
				} `json:"store"`
			}
			if err := json.Unmarshal(b, &st); err != nil {
				t.Fatalf("GET /api/state: %v in %s", err, body)
			}
			if st.Store == nil || st.Store.OK || !strings.Contains(st.Store.Error, c.says) {
				t.Fatalf("store: %s; want an error saying %q", body, c.says)
			}
			for _, name := range c.hidden {
				if strings.Contains(body, name) {
					t.Errorf("/api/state shows %q: %s", name, body)
				}
			}
		})
	}
}
