package mysql

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/leafd/leafd/store/internal/engine"
)

// mysqlErr is the error a MySQL-family server answers with.
func mysqlErr(number uint16, state, message string) *mysql.MySQLError {
	e := &mysql.MySQLError{Number: number, Message: message}
	copy(e.SQLState[:], state)
	return e
}

// TestRows: every row of the error table is found by the error it
// describes (a SQLSTATE row by a number no row names), and its
// placeholders are filled.
func TestRows(t *testing.T) {
	for _, r := range rows {
		number, state := 1, "HY000"
		if s, ok := strings.CutPrefix(r.Code, "SQLSTATE "); ok {
			state = s
		} else {
			n, err := strconv.Atoi(r.Code)
			if err != nil {
				t.Fatal(err)
			}
			number = n
		}
		msg := "injected: " + r.Match + " " + r.Name
		if got := rule(mysqlErr(uint16(number), state, msg)); got == nil || got.Code != r.Code || got.Match != r.Match {
			t.Errorf("%s %q: the table finds %+v for it", r.Code, r.Match, got)
		}
	}
	v := classify(mysqlErr(1049, "42000", "Unknown database 'leaf-d'"))
	if v.Cause != "database leaf-d does not exist" || !strings.Contains(v.Hint, "CREATE DATABASE `leaf-d`") {
		t.Errorf("1049 worded %+v", v)
	}
	v = classify(mysqlErr(1040, "08004", "Too many connections"))
	if !strings.Contains(v.Hint, fmt.Sprintf("at most %d", engine.ServerPool.MaxOpen)) || strings.Contains(v.Hint+v.Cause, "{") {
		t.Errorf("1040 worded %+v", v)
	}
}
