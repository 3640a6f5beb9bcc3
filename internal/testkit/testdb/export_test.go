package testdb

// SettlePostgres waits until the PostgreSQL databases tests gave back are
// reset (and in the pool) or dropped.
func SettlePostgres() {
	pgServer.mu.Lock()
	defer pgServer.mu.Unlock()
	for pgServer.pool.resetting > 0 {
		pgServer.pool.ready.Wait()
	}
}
