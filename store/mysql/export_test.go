package mysql

import "time"

// What the tests of the lock row reach.
var TakeLockRow = takeLockRow

const (
	CreateLockTableSQL = createLockTableSQL
	MigrateLock        = migrateLock
	NowMs              = nowMs
)

// SetLockRowWait bounds the wait for the lock row until restore.
func SetLockRowWait(d time.Duration) (restore func()) {
	old := lockRowWait
	lockRowWait = d
	return func() { lockRowWait = old }
}
