package sharded

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"
)

// The operator's commands (leafd shards move, leafd shards status): they
// change or read where slots are, apart from the allocation path.

// MoveStep names the steps of MoveSlot, for tests that stop a move between
// two of them.
type MoveStep int

// The steps of a move, in order.
const (
	// MoveLeaving: the slot is marked leaving in its database; no range is
	// loaded from it any more there.
	MoveLeaving MoveStep = iota + 1
	// MoveActivated: its counters are in the target database and the slot
	// is active there.
	MoveActivated
	// MoveGone: the source database marks it gone.
	MoveGone
)

// MoveSlot moves slot k to store.shards[to]. The steps: mark the slot
// leaving in every other database where it is active (a shared lock taken
// by every load of the slot makes this wait for loads in flight); read its
// counters in every other database where it is active or leaving; in one
// transaction of the target, raise the target's counters to the highest of
// them and make the slot active; mark it gone in those databases.
// Interrupted at any point, the slot is active in at most one database,
// and running MoveSlot again, to that database or to another, completes
// the move: a move stopped once the slot was active in its target leaves
// it active there and leaving in its source, and the next move takes the
// counters of both. after, when not nil, runs after each step; an error
// from it stops the move there (tests inject crashes so).
//
// Errors: a slot or database out of range; an error wrapping
// ErrMismatch when store.shards does not match the databases' records
// (see Verify) or the target has no record; store_unavailable when a
// database it needs does not answer; an error when no database holds the
// slot.
func (s *Store) MoveSlot(ctx context.Context, k int64, to int, after func(MoveStep) error) error {
	if k < 0 || k >= s.slots {
		return fmt.Errorf("slot %d does not exist: slots are 0 to %d", k, s.slots-1)
	}
	if to < 0 || to >= len(s.dbs) {
		return fmt.Errorf("database %d does not exist: store.shards has %d (0 to %d)", to, len(s.dbs), len(s.dbs)-1)
	}
	if after == nil {
		after = func(MoveStep) error { return nil }
	}
	// A list that is not the deployment's would move the slot into a
	// database of another deployment, or one that none of this
	// deployment's servers reads: the slot would be lost, or served twice.
	if err := s.Verify(ctx); err != nil {
		return err
	}
	if _, found, err := s.dbs[to].readMeta(ctx); err != nil {
		return err
	} else if !found {
		return mismatch("store.shards[%d] has no record of the deployment: add a database with leafd migrate (with this store.shards) before moving slots to it", to)
	}
	// The sources: every database other than to where the slot is active
	// or leaving. A leaving one may hold the highest counters (a move
	// stopped before its target was activated), an active one surely does
	// (one stopped after): each is read, none passed over.
	var srcs []int
	here := "" // the slot's state in the target
	for i, d := range s.dbs {
		var state []string
		if err := d.x.SelectContext(ctx, &state, d.q(slotStateSQL), k); err != nil {
			return d.Wrap(err, fmt.Sprintf("read slot %d in store.shards[%d]", k, i))
		}
		switch {
		case len(state) == 0 || state[0] == slotGone:
		case i == to:
			here = state[0]
		default:
			srcs = append(srcs, i)
		}
	}
	switch {
	case len(srcs) == 0 && here == slotActive:
		return nil // already there
	case len(srcs) == 0 && here == "":
		return fmt.Errorf("slot %d is in no database of store.shards: see leafd shards status", k)
	}
	for _, i := range srcs {
		from := s.dbs[i]
		if _, err := from.x.ExecContext(ctx, from.q(slotSetStateSQL+` AND state = ?`), slotLeaving, k, slotActive); err != nil {
			return from.Wrap(err, fmt.Sprintf("mark slot %d leaving in store.shards[%d]", k, i))
		}
	}
	if err := after(MoveLeaving); err != nil {
		return err
	}
	type counter struct {
		Tag   string `db:"biz_tag"`
		MaxID int64  `db:"max_id"`
	}
	var counters []counter
	for _, i := range srcs {
		from := s.dbs[i]
		var some []counter
		if err := from.x.SelectContext(ctx, &some, from.q(slotRowsSQL), k); err != nil {
			return from.Wrap(err, fmt.Sprintf("read slot %d's counters in store.shards[%d]", k, i))
		}
		counters = append(counters, some...)
	}
	dst := s.dbs[to]
	err := dst.WriteTx(ctx, func(ctx context.Context, tx *sqlx.Tx) error {
		for _, c := range counters {
			if n, err := affected(tx.ExecContext(ctx, dst.q(fmt.Sprintf(slotRaiseSQL, dst.Greatest())), c.MaxID, c.Tag, k)); err != nil {
				return err
			} else if n == 0 {
				if _, err := tx.ExecContext(ctx, dst.q(slotRowInsertSQL), c.Tag, k, c.MaxID); err != nil {
					return err
				}
			}
		}
		if err := ensureSlot(ctx, dst, tx, k, slotActive); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, dst.q(slotSetStateSQL), slotActive, k)
		return err
	})
	if err != nil {
		return dst.Wrap(err, fmt.Sprintf("activate slot %d in store.shards[%d]", k, to))
	}
	if err := after(MoveActivated); err != nil {
		return err
	}
	for _, i := range srcs {
		from := s.dbs[i]
		if _, err := from.x.ExecContext(ctx, from.q(slotSetStateSQL), slotGone, k); err != nil {
			return from.Wrap(err, fmt.Sprintf("mark slot %d gone in store.shards[%d]", k, i))
		}
	}
	if err := after(MoveGone); err != nil {
		return err
	}
	s.log.Info("store: slot moved", "slot", k, "from", srcs, "to", to, "tags", len(counters))
	_, err = s.readOwners(ctx)
	return err
}

// ShardStatus is one database of store.shards as Status sees it.
type ShardStatus struct {
	Index   int
	Address string
	// Err is why the database could not be read; the rest is then empty.
	Err error
	// Deployment, Slots and Count are its record (empty before
	// initialisation).
	Deployment  string
	Slots       int64
	Count       int
	Active      []int64 // slots served here
	Leaving     []int64 // slots of an interrupted move: served nowhere until it is run again
	Initialised bool
}

// Status reads every database's record and slots.
func (s *Store) Status(ctx context.Context) []ShardStatus {
	out := make([]ShardStatus, len(s.dbs))
	for i, d := range s.dbs {
		st := &out[i]
		*st = ShardStatus{Index: i, Address: d.Address().Name}
		m, ok, err := d.readMeta(ctx)
		if err != nil {
			st.Err = err
			continue
		}
		if ok {
			st.Deployment, st.Slots, st.Count, st.Initialised = m.Deployment, m.Slots, m.Count, m.State == shardReady
		}
		rows, err := d.slotStates(ctx)
		st.Err = err
		for _, r := range rows {
			switch r.State {
			case slotActive:
				st.Active = append(st.Active, r.Slot)
			case slotLeaving:
				st.Leaving = append(st.Leaving, r.Slot)
			}
		}
	}
	return out
}
