package config_test

import (
	"strings"
	"testing"
)

// snowflake.unprotected_fixed_id is read from the file and the environment,
// is off by default, and is refused with worker_id auto, naming both keys.
func TestUnprotectedFixedID(t *testing.T) {
	c, err, _ := loadWith(t, "", nil)
	if err != nil || c.Snowflake.UnprotectedFixedID {
		t.Fatalf("default: %v, unprotected_fixed_id %v; want false", err, c.Snowflake.UnprotectedFixedID)
	}
	c, err, _ = loadWith(t, "", map[string]string{"LEAFD_SNOWFLAKE_WORKER_ID": "7", "LEAFD_SNOWFLAKE_UNPROTECTED_FIXED_ID": "true"})
	if err != nil || !c.Snowflake.UnprotectedFixedID || c.Snowflake.WorkerID.ID != 7 {
		t.Fatalf("from the environment: %v, %+v", err, c.Snowflake)
	}
	c, err, _ = loadWith(t, "snowflake: {worker_id: 3, unprotected_fixed_id: true}", nil)
	if err != nil || !c.Snowflake.UnprotectedFixedID {
		t.Fatalf("from the file: %v, %+v", err, c.Snowflake)
	}
	_, err, _ = loadWith(t, "snowflake: {unprotected_fixed_id: true}", nil)
	ps := problems(err)
	if len(ps) != 1 || ps[0].Key != "snowflake.unprotected_fixed_id" ||
		!strings.Contains(err.Error(), "true needs a fixed snowflake.worker_id, not auto") {
		t.Fatalf("with worker_id auto: %v, want one problem about snowflake.unprotected_fixed_id naming snowflake.worker_id", err)
	}
}
