package deploy_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/go-sql-driver/mysql"

	"github.com/leafd/leafd/store"
)

// trickyPasswords are passwords with every printable ASCII character, alone
// and among others, and the ones that look like DSN syntax.
func trickyPasswords() []string {
	pws := []string{
		"p@ss/w:rd", "x)/y", "@tcp(evil:1)/other", "a/b@c", "?charset=gbk", "/", "@", "pw/leaf?x=1&y=2",
		"%41%zz", "p%40ss", `back\\slash"quote'single`, "with space", "ünïcødé", "$HOME",
	}
	for c := byte(0x21); c < 0x7f; c++ {
		pws = append(pws, string(c), "a"+string(c)+"b")
	}
	return pws
}

// TestDSNPasswordCharacters: the DSN the Compose file builds carries any
// password to go-sql-driver/mysql unchanged. The driver takes the password
// from the first ':' to the last '@' before the last '/', and never
// URL-decodes it, so no character needs escaping there; Compose
// interpolates a value from the environment once, so '$' arrives as it is.
// leafd's configuration loader keeps the DSN byte for byte, and its own
// check of the DSN (store.CheckDSN, what start-up runs) accepts them
// all.
func TestDSNPasswordCharacters(t *testing.T) {
	for _, pw := range trickyPasswords() {
		p := loadProject(t, "MYSQL_ROOT_PASSWORD="+pw)
		mysqlEnv := env(t, service(t, p, "mysql"))
		if mysqlEnv["MYSQL_ROOT_PASSWORD"] != pw {
			t.Fatalf("MYSQL_ROOT_PASSWORD %q reaches mysql as %q", pw, mysqlEnv["MYSQL_ROOT_PASSWORD"])
		}
		for _, name := range leafdServices {
			dsn := env(t, service(t, p, name))["LEAFD_STORE_DSN"]
			checkDSN(t, dsn, mysqlEnv)
			if err := store.CheckDSN("mysql", dsn); err != nil {
				t.Errorf("password %q: leafd refuses the DSN: %v", pw, err)
			}
		}
		t.Run("", func(t *testing.T) { // for the directory and environment it changes
			e := env(t, service(t, p, "leafd1"))
			cfg, err := loadLeafdConfig(t, e)
			if err != nil {
				t.Fatalf("password %q: leafd refuses the environment: %v", pw, err)
			}
			if cfg.Store.DSN != e["LEAFD_STORE_DSN"] {
				t.Fatalf("password %q: leafd's configuration reads LEAFD_STORE_DSN %q as %q", pw, e["LEAFD_STORE_DSN"], cfg.Store.DSN)
			}
		})
	}
}

// TestDSNNotURLEscaped: a %-escape in the password is not decoded, so a
// password must be written as it is (the reason the Compose file pastes it
// unescaped). The one character that cannot appear is a ':' in the user
// name: the first ':' ends the user.
func TestDSNNotURLEscaped(t *testing.T) {
	cfg, err := mysql.ParseDSN("root:p%40ss@tcp(mysql:3306)/leaf")
	if err != nil || cfg.Passwd != "p%40ss" {
		t.Fatalf("password p%%40ss read as %q (%v): the driver decodes escapes after all?", cfg.Passwd, err)
	}
	cfg, err = mysql.ParseDSN("us:er:pw@tcp(mysql:3306)/leaf")
	if err != nil || cfg.User != "us" || cfg.Passwd != "er:pw" {
		t.Fatalf("user us:er read as %q with password %q (%v): a ':' in the user name works after all?", cfg.User, cfg.Passwd, err)
	}
}

// TestDSNFromEnvFile: a password from an .env file reaches the DSN as the
// file means it. Single quotes keep a '$' literal; in double quotes or bare,
// Compose expands it (documented in the Compose file).
func TestDSNFromEnvFile(t *testing.T) {
	const pw = `p@ss/w:rd$x(y)?z=1&%41`
	file := filepath.Join(t.TempDir(), ".env")
	if err := os.WriteFile(file, []byte("MYSQL_ROOT_PASSWORD='"+pw+"'\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := loadProjectWith(t, cli.WithEnv(nil), cli.WithEnvFiles(file), cli.WithDotEnv)
	mysqlEnv := env(t, service(t, p, "mysql"))
	if mysqlEnv["MYSQL_ROOT_PASSWORD"] != pw {
		t.Fatalf("password %q from a single-quoted .env value reaches mysql as %q", pw, mysqlEnv["MYSQL_ROOT_PASSWORD"])
	}
	for _, name := range leafdServices {
		checkDSN(t, env(t, service(t, p, name))["LEAFD_STORE_DSN"], mysqlEnv)
	}
}

// TestDSNOverride: MYSQL_DSN replaces the whole DSN of every leafd service,
// byte for byte, and changes nothing of the mysql service.
func TestDSNOverride(t *testing.T) {
	const dsn = "ids:p@ss/w:rd$1@tcp(db.example:3306)/ids?parseTime=true&timeout=5s"
	p := loadProject(t, "MYSQL_DSN="+dsn, "MYSQL_ROOT_PASSWORD=unused")
	for _, name := range leafdServices {
		if got := env(t, service(t, p, name))["LEAFD_STORE_DSN"]; got != dsn {
			t.Errorf("%s: LEAFD_STORE_DSN %q, want MYSQL_DSN %q as it is", name, got, dsn)
		}
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil || cfg.User != "ids" || cfg.Passwd != "p@ss/w:rd$1" || cfg.Addr != "db.example:3306" || cfg.DBName != "ids" {
		t.Errorf("the override's DSN reads as %+v (%v)", cfg, err)
	}
	if e := env(t, service(t, p, "mysql")); e["MYSQL_ROOT_PASSWORD"] != "unused" {
		t.Errorf("mysql environment %v, want MYSQL_ROOT_PASSWORD unused", e)
	}
}
