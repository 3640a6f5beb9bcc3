package store

import "time"

// Address describes the database address a store is using, among those
// of its cluster (store.dsn first, then store.fallback_dsns). A store of
// one address, or of a file, always reports that one with no switch.
type Address struct {
	// Name is the address in use, host:port (or the socket path).
	Name string
	// Index is its position in the list: 0 is store.dsn.
	Index int
	// Count is the number of addresses.
	Count int
	// Switches counts the moves from one address to another since the
	// store was opened; LastSwitch is when the last happened (zero if
	// none) and LastSwitchReason why (empty for a move back to the first).
	Switches         int64
	LastSwitch       time.Time
	LastSwitchReason string
	// Shards, for a store over store.shards, is each database as the store
	// last saw it; nil otherwise.
	Shards []ShardAddress
}

// ShardAddress is one database of store.shards: where it is, whether the
// store currently passes it over after a failure, and the slots it serves
// as last read (refreshed every 10 seconds and after every move).
type ShardAddress struct {
	Index int
	Name  string
	Down  bool
	Slots []int64
}

// Address returns the database address in use and the switches between
// the cluster's addresses so far. A store opened without fallbacks always
// reports its one address (a SQLite store its file) with no switch.
func (s *db) Address() Address {
	if s.cluster == nil {
		return Address{Name: s.addr, Count: 1}
	}
	return s.cluster.state()
}
