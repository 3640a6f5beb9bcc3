package testenv

import "os"

// Env returns the whole environment of a leafd under test: PATH, HOME set
// to home (a directory of the test's), leafd on 127.0.0.1:0 (a free port the
// kernel picks) logging JSON (from which WaitServing learns the port), then
// settings, LEAFD_* variables that may override those two. Nothing else of
// the caller's environment reaches it, so that a developer's LEAFD_*
// variables cannot change what a test tests. Start leafd in a directory of
// its own, too, so that it reads no ./config.yaml.
func Env(home string, settings ...string) []string {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home,
		"LEAFD_HTTP_ADDR=127.0.0.1:0", "LEAFD_LOG_FORMAT=json"}
	return append(env, settings...)
}
