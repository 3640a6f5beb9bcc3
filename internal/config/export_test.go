package config

import (
	"errors"
	"time"
)

// Validate checks every value of c and returns all problems at once, joined
// with errors.Join: each is a *KeyError, printed as one line. It returns nil
// when c can be used.
func (c *Config) Validate() error {
	return errors.Join(toErrors(c.validate(time.Now(), nil))...)
}
