// Package sharded is a store over several independent databases of one
// engine (store.shards), each opened as a store.Node.
//
// One tag's IDs are split into S slots (store.shard_slots, chosen once when
// sharding is initialised and recorded in every database): slot k hands out
// only IDs that are k modulo S, so that no two slots can ever hand out the
// same ID. Each slot's counters live in exactly one database at a time, in
// leafd's own tables (migrations 00004): leafd_slot says which slots are
// active in a database, leafd_slot_alloc holds each tag's next ID per slot.
// Leaf's leaf_alloc keeps every tag's definition (step, description) in
// every database, and its max_id is the tag's base: slots start above it,
// so that a database that already served a tag continues above what it
// handed out. Who belongs to the deployment is recorded too (migration
// 00008): each database's own random id, and in every record the ids of
// all the deployment's databases in order (see claim).
//
// A range load picks a slot on a database that answers (round robin over
// the slots, per tag, so that slots advance evenly), and moves on to a slot
// of another database at once when that one fails. The range is strided:
// Start, Start+S, … below End. Within one server a tag's IDs still only
// grow: the load raises a lagging slot's counter to just above the last ID
// the server handed out for the tag (its floor) in the same UPDATE.
//
// A slot moves between databases in steps that are safe to interrupt at
// any point (MoveSlot): the slot is never active in two databases, at worst
// briefly active in none.
package sharded

import (
	"cmp"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/segment"
	"github.com/leafd/leafd/snowflake"
	"github.com/leafd/leafd/store"
)

// Slot states in leafd_slot.
const (
	slotActive  = "active"
	slotLeaving = "leaving" // moving away: not served here, counters not yet copied out for sure
	slotGone    = "gone"    // moved away
)

// States of a database's leafd_shard row.
const (
	shardInitialising = "initialising"
	shardReady        = "ready"
)

// A database that failed is passed over for shardDownFor before it is
// tried again; while the attempts after that keep failing, for twice as
// long each time, up to shardDownMax: a database that hangs costs one
// attempt now and then, not one per load.
const (
	shardDownFor = time.Second
	shardDownMax = 16 * time.Second
)

// ownersRefresh is how often the slot placement is read again (a Store's
// refresh, which tests shorten).
const ownersRefresh = 10 * time.Second

// The sharded store's SQL. %[1]s is the dialect's greatest function.
const (
	shardMetaSQL     = `SELECT deployment, slots, db_index, db_count, state, COALESCE(members, '') AS members FROM leafd_shard WHERE id = 1`
	shardPlaceSQL    = `SELECT deployment, slots, db_index, db_count, state FROM leafd_shard WHERE id = 1` // any schema since 00004
	shardInsertSQL   = `INSERT INTO leafd_shard (id, deployment, slots, db_index, db_count, state, members) VALUES (1, ?, ?, ?, ?, ?, ?)`
	shardMembersSQL  = `UPDATE leafd_shard SET members = ?, db_count = ?, update_time = CURRENT_TIMESTAMP WHERE id = 1 AND COALESCE(members, '') = ?`
	shardStateSQL    = `UPDATE leafd_shard SET state = ?, update_time = CURRENT_TIMESTAMP WHERE id = 1 AND members = ?`
	identitySQL      = `SELECT uid FROM leafd_database WHERE id = 1`
	identityInsert   = `INSERT INTO leafd_database (id, uid) VALUES (1, ?)`
	slotStatesSQL    = `SELECT slot, state FROM leafd_slot ORDER BY slot`
	slotStateSQL     = `SELECT state FROM leafd_slot WHERE slot = ?`
	slotInsertSQL    = `INSERT INTO leafd_slot (slot, state) VALUES (?, ?)`
	slotSetStateSQL  = `UPDATE leafd_slot SET state = ?, update_time = CURRENT_TIMESTAMP WHERE slot = ?`
	slotAllocSQL     = `UPDATE leafd_slot_alloc SET max_id = %[1]s(max_id, ?) + ?, update_time = CURRENT_TIMESTAMP WHERE biz_tag = ? AND slot = ? AND %[1]s(max_id, ?) <= ?`
	slotReadSQL      = `SELECT max_id FROM leafd_slot_alloc WHERE biz_tag = ? AND slot = ?`
	slotRowInsertSQL = `INSERT INTO leafd_slot_alloc (biz_tag, slot, max_id) VALUES (?, ?, ?)`
	slotRowsSQL      = `SELECT biz_tag, max_id FROM leafd_slot_alloc WHERE slot = ?`
	slotRaiseSQL     = `UPDATE leafd_slot_alloc SET max_id = %[1]s(max_id, ?), update_time = CURRENT_TIMESTAMP WHERE biz_tag = ? AND slot = ?`
	tagBaseSQL       = `SELECT biz_tag, max_id, step FROM leaf_alloc WHERE biz_tag = ?`
	tagMarkSQL       = `SELECT max_id FROM leafd_tag_highwater WHERE biz_tag = ?`
)

// Options configure Open.
type Options struct {
	// Slots is S, used when sharding is initialised
	// (store.DefaultShardSlots if 0); the databases' record must match it.
	Slots int
	// Logger logs databases that fail and come back (slog.Default()).
	Logger *slog.Logger
	// AttemptTimeout bounds one attempt on one database while another
	// database can serve, so that one that hangs (stopped, or its network
	// dropping packets) is given up on and passed over as fast as one that
	// is gone. 0: attempts last as long as the caller's context. A server
	// sets it to half of segment.wait_timeout, so that a load that gives
	// up on a database still lands within it.
	AttemptTimeout time.Duration
}

// Store is a store over several independent databases of one engine, made
// by Open. Its segment methods spread tags over the databases' slots;
// snowflake worker id leases and the access tokens live in the first
// database, whose RenewWorker, ReleaseWorker, CreateToken, ListTokens and
// RevokeToken it serves. It is safe for concurrent use.
type Store struct {
	firstDB // store.shards[0]
	driver  string
	slots   int64
	dbs     []*shardDB
	log     *slog.Logger
	attempt time.Duration // Options.AttemptTimeout

	mu         sync.Mutex
	deployment string           // learnt from the first database read
	members    []string         // the ids of the deployment's databases, as recorded
	owner      []int            // slot → database index; -1 when no database serves it
	ownersAt   time.Time        // when owner was read
	refresh    time.Duration    // how often owner is read again: ownersRefresh
	floors     map[string]int64 // tag → the highest ID handed out for it by this store
	cursor     map[string]int   // tag → the slot its next load tries first

	// beforeClaim, when not nil, runs before each database's step of an
	// initialisation: tests stop two initialisations between their steps.
	beforeClaim func(db int)
	// afterMetaRead, when not nil, runs after each read of a database's
	// record while the records are checked.
	afterMetaRead func(db int)
}

var _ store.Store = (*Store)(nil)

// shardDB is one database of a Store.
type shardDB struct {
	store.Node          // the engine's store on it
	x          *sqlx.DB // its pool
	idx        int

	downUntil time.Time     // under Store.mu
	downFor   time.Duration // how long it was last passed over for; 0 once it served (under Store.mu)
	// verified is set once the database's record was read and matched the
	// others' (under Store.mu): only then are its slots used.
	verified bool
}

// Open returns a store over the databases dsns name, in store.shards
// order, all of engine driver. Like Open, it connects to none of them.
//
// Errors: an unknown driver, fewer than two databases (one database is
// store.dsn), a slot count outside len(dsns)..store.MaxShardSlots, or a
// DSN that does not parse.
func Open(driver string, dsns []string, o Options) (*Store, error) {
	o.Slots = cmp.Or(o.Slots, store.DefaultShardSlots)
	o.Logger = cmp.Or(o.Logger, slog.Default())
	switch {
	case len(dsns) < 2:
		return nil, fmt.Errorf("store.shards lists %d databases: list at least two, or use store.dsn for one", len(dsns))
	case o.Slots < len(dsns) || o.Slots > store.MaxShardSlots:
		return nil, fmt.Errorf("store.shard_slots is %d: use %d (the number of databases) to %d", o.Slots, len(dsns), store.MaxShardSlots)
	}
	s := &Store{driver: driver, slots: int64(o.Slots), log: o.Logger, attempt: o.AttemptTimeout,
		refresh: ownersRefresh, floors: map[string]int64{}, cursor: map[string]int{}}
	for i, dsn := range dsns {
		n, err := store.OpenNode(driver, dsn)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("store.shards[%d]: %w", i, err)
		}
		s.dbs = append(s.dbs, &shardDB{Node: n, x: n.DB(), idx: i})
	}
	s.firstDB = s.dbs[0]
	return s, nil
}

// Driver returns the engine of every database.
func (s *Store) Driver() string { return s.driver }

// Slots returns S as configured (the databases' record once verified).
func (s *Store) Slots() int64 { return s.slots }

// Address reports the first database's address, with the number of
// databases as the count, and every database's health and slots as the
// store last saw them (no query: Status reads the databases).
func (s *Store) Address() store.Address {
	a := s.dbs[0].Address()
	a.Count = len(s.dbs)
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for _, d := range s.dbs {
		sa := store.ShardAddress{Index: d.idx, Name: d.Address().Name, Down: now.Before(d.downUntil), Slots: []int64{}}
		for k, o := range s.owner {
			if o == d.idx {
				sa.Slots = append(sa.Slots, int64(k))
			}
		}
		a.Shards = append(a.Shards, sa)
	}
	return a
}

// Close closes every database's pool.
func (s *Store) Close() error {
	var errs []error
	for _, d := range s.dbs {
		errs = append(errs, d.Close())
	}
	return errors.Join(errs...)
}

// Ping succeeds when any database answers: IDs can be served. It asks
// them all at once, so that one that hangs does not hold up the answer of
// one that answers.
func (s *Store) Ping(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(s.dbs))
	var wg sync.WaitGroup
	for i, d := range s.dbs {
		wg.Go(func() {
			if errs[i] = d.Ping(ctx); errs[i] == nil {
				cancel() // the others need not answer
			}
		})
	}
	wg.Wait()
	if slices.Contains(errs, nil) {
		return nil
	}
	return s.unavailable(errs)
}

// unavailable is the error of an operation that no database could serve:
// the first database's error, which says what went wrong, with how many
// failed.
func (s *Store) unavailable(errs []error) error {
	if len(errs) == 0 {
		return leafd.Errorf(leafd.EStoreUnavailable, "no database of store.shards could serve the request")
	}
	if le, ok := errors.AsType[*leafd.Error](errs[0]); ok && le.Code == leafd.EStoreUnavailable {
		return leafd.Wrap(leafd.EStoreUnavailable, errors.Join(errs...),
			fmt.Sprintf("none of the %d databases of store.shards could serve the request; the first: %s", len(s.dbs), le.Message))
	}
	return errors.Join(errs...)
}

// ---------------------------------------------------------------------------
// Initialisation and verification

// shardMeta is a database's leafd_shard row.
type shardMeta struct {
	Deployment string `db:"deployment"`
	Slots      int64  `db:"slots"`
	Index      int    `db:"db_index"`
	Count      int    `db:"db_count"`
	State      string `db:"state"`
	// Members lists the ids of the deployment's databases in store.shards
	// order, comma separated; empty in a record written before migration
	// 00008, until a server fills it in.
	Members string `db:"members"`
}

// members returns the record's member list, nil when it has none.
func (m *shardMeta) members() []string {
	if m.Members == "" {
		return nil
	}
	return strings.Split(m.Members, ",")
}

// readMeta reads a database's record; ok is false when it has none.
func (d *shardDB) readMeta(ctx context.Context) (m shardMeta, ok bool, err error) {
	err = d.x.GetContext(ctx, &m, d.q(shardMetaSQL))
	if errors.Is(err, sql.ErrNoRows) {
		return shardMeta{}, false, nil
	}
	if err != nil {
		return shardMeta{}, false, d.Wrap(err, "read leafd_shard")
	}
	return m, true, nil
}

// identity returns the database's own id (leafd_database), empty when it
// has none yet; with create, it writes a random one first if so. The id,
// not the DSN, says which database a record's member list names: one
// database can be reached under several addresses, and an emptied or
// replaced database gets a new id.
func (d *shardDB) identity(ctx context.Context, create bool) (string, error) {
	var uid string
	err := d.x.GetContext(ctx, &uid, d.q(identitySQL))
	switch {
	case err == nil:
		return uid, nil
	case errors.Is(err, sql.ErrNoRows) && create:
	case errors.Is(err, sql.ErrNoRows), store.MissingTable(err):
		return "", nil
	default:
		return "", d.Wrap(err, "read leafd_database")
	}
	err = d.WriteTx(ctx, func(ctx context.Context, tx *sqlx.Tx) error {
		var have []string
		if err := tx.SelectContext(ctx, &have, d.q(identitySQL)); err != nil {
			return err
		}
		if len(have) > 0 {
			uid = have[0] // another server wrote it at the same moment
			return nil
		}
		uid = randomHex(16)
		if _, err := tx.ExecContext(ctx, d.q(identityInsert), uid); err != nil {
			return duplicateRetries(d, err)
		}
		return nil
	})
	if err != nil {
		return "", d.Wrap(err, "write leafd_database")
	}
	return uid, nil
}

// ErrMismatch is wrapped by the error of a server whose store.shards
// does not match what the databases record: starting would risk handing
// out IDs twice, so the server must not start.
var ErrMismatch = errors.New("store.shards does not match the databases")

func mismatch(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMismatch, fmt.Sprintf(format, args...))
}

// Verify checks every database that answers against store.shards: all of
// one deployment, with this slot count, each at its place in the list and
// knowing how many there are, each the database the deployment's member
// list names at that place, none missing its record, and no slot active in
// two of them. It returns an error wrapping ErrMismatch when they do
// not match, and nil when sharding is not initialised yet (Migrate does
// that). Databases that do not answer are left out: they are checked when
// they are next used.
func (s *Store) Verify(ctx context.Context) error {
	metas, errs, ids, err := s.metas(ctx)
	if err != nil {
		return err
	}
	if _, err = s.check(metas, errs, ids); err != nil {
		return err
	}
	_, err = s.readOwners(ctx)
	return err
}

// metas reads every database's record and id; a database that does not
// answer has a nil record, an empty id and its error in errs.
func (s *Store) metas(ctx context.Context) ([]*shardMeta, []error, []string, error) {
	n := len(s.dbs)
	metas := make([]*shardMeta, n)
	errs := make([]error, n)
	ids := make([]string, n)
	reached := 0
	// An initialisation marks the databases ready only once each has its
	// record. So once a read shows a database ready, every record was
	// written before it: a database that answered without a record is read
	// again after the first read that showed ready, and one still without
	// a record then was really emptied or replaced. A record written by an
	// initialisation that ran between two of these reads shows then.
	readyAt := -1              // the first read that showed a database ready
	lastRead := make([]int, n) // each database's last read
	order := make([]int, 0, 2*n)
	for i := range n {
		order = append(order, i)
	}
	for k := 0; k < len(order); k++ {
		i := order[k]
		d := s.dbs[i]
		m, ok, err := d.readMeta(ctx)
		if s.afterMetaRead != nil {
			s.afterMetaRead(i)
		}
		first := k < n
		lastRead[i] = k
		switch {
		case err != nil && !store.MissingTable(err): // a missing table: not migrated yet, no record
			errs[i] = err
		case first:
			id, ierr := d.identity(ctx, false)
			if ierr != nil {
				errs[i] = ierr
				break
			}
			ids[i] = id
			reached++
		}
		if errs[i] == nil && err == nil && ok {
			metas[i] = &m
			if m.State == shardReady && readyAt < 0 {
				readyAt = k
			}
		}
		if k == len(order)-1 && readyAt >= 0 {
			for j := range n {
				if metas[j] == nil && errs[j] == nil && lastRead[j] < readyAt {
					order = append(order, j)
				}
			}
		}
	}
	if reached == 0 {
		return nil, errs, nil, s.unavailable(slices.DeleteFunc(errs, func(e error) bool { return e == nil }))
	}
	return metas, errs, ids, nil
}

// check judges the records and ids read: it returns the deployment (empty
// when no database is initialised) or a mismatch.
func (s *Store) check(metas []*shardMeta, errs []error, ids []string) (string, error) {
	for i, id := range ids {
		if j := slices.Index(ids[:i], id); id != "" && j >= 0 {
			return "", mismatch("store.shards[%d] and store.shards[%d] are the same database: list each database once", j, i)
		}
	}
	var (
		first   *shardMeta
		members []string // the longest list recorded: an extension may have been interrupted
		count   int
		ready   bool
	)
	for i, m := range metas {
		if m == nil {
			continue
		}
		first = cmp.Or(first, m)
		switch {
		case m.Deployment != first.Deployment:
			return "", mismatch("store.shards[%d] belongs to another deployment (%s) than the databases before it (%s): "+
				"it holds another leafd's slots; list the databases of one deployment (a database left by a server whose initialisation was refused: "+
				"see \"A database left by a refused initialisation\" in docs/shards.md)", i, m.Deployment, first.Deployment)
		case m.Slots != s.slots:
			return "", mismatch("the databases record %d slots, store.shard_slots is %d: the slot count is fixed when sharding is initialised; set store.shard_slots to %d",
				m.Slots, s.slots, m.Slots)
		case m.Index != i:
			return "", mismatch("store.shards[%d] is the database recorded as number %d of the deployment: keep store.shards in the order it was initialised in", i, m.Index)
		case m.Count > len(s.dbs), len(m.members()) > len(s.dbs):
			return "", mismatch("the databases record %d databases, store.shards lists %d: a database is missing from the list",
				max(m.Count, len(m.members())), len(s.dbs))
		case !agree(m.members(), members):
			return "", mismatch("store.shards[%d] records other databases as the deployment's than the databases before it: "+
				"servers with different store.shards initialised them; see leafd shards status and \"A database left by a refused initialisation\" in docs/shards.md", i)
		}
		if len(m.members()) > len(members) {
			members = m.members()
		}
		count, ready = max(count, m.Count), ready || m.State == shardReady
	}
	for i, m := range metas {
		// An initialised deployment: a database without a record must be
		// a new one, after those it records.
		if ready && m == nil && errs[i] == nil && i < count {
			return "", mismatch("store.shards[%d] has no record of the deployment although the deployment has %d databases: "+
				"it is not the database that was there (a new or emptied one?); its slots' counters are lost with it. "+
				"Restore that database from a backup, or see \"When a database is lost for good\" in docs/shards.md", i, count)
		}
	}
	for i, id := range members {
		if ids[i] != "" && ids[i] != id {
			return "", mismatch("store.shards[%d] is not the database the deployment recorded at that place (another database, or one emptied and used again): "+
				"list the deployment's databases in the order it was initialised in; see leafd shards status", i)
		}
	}
	if first == nil {
		return "", nil
	}
	s.mu.Lock()
	s.deployment, s.members = first.Deployment, members
	s.mu.Unlock()
	return first.Deployment, nil
}

// agree reports whether two member lists can be of one deployment: one is
// the other, or the start of it (the deployment grew and a record is
// behind).
func agree(a, b []string) bool {
	n := min(len(a), len(b))
	return slices.Equal(a[:n], b[:n])
}

// readOwners reads where every slot is active and remembers it. A slot
// active in two databases is a mismatch.
func (s *Store) readOwners(ctx context.Context) ([]int, error) {
	owner := make([]int, s.slots)
	for k := range owner {
		owner[k] = -1
	}
	s.mu.Lock()
	known := s.owner
	s.mu.Unlock()
	for _, d := range s.dbs {
		if s.isDown(d.idx) {
			continue // keeps the slots it was known to hold
		}
		var rows []slotState
		actx, cancel := s.attemptContext(ctx, d.idx, known)
		ok := s.usable(actx, d)
		var err error
		if ok {
			rows, err = d.slotStates(actx)
		}
		cancel()
		if !ok || err != nil {
			if err != nil && actx.Err() != nil && ctx.Err() == nil {
				s.markDown(d.idx, err) // it hangs
			}
			continue // not reachable: its slots are unknown
		}
		for _, r := range rows {
			if r.State != slotActive || r.Slot < 0 || r.Slot >= s.slots {
				continue
			}
			if o := owner[r.Slot]; o >= 0 {
				return nil, mismatch("slot %d is active in store.shards[%d] and store.shards[%d]: it must be in one database only; "+
					"finish the move that was interrupted with leafd shards move %d <database>", r.Slot, o, d.idx, r.Slot)
			}
			owner[r.Slot] = d.idx
		}
	}
	s.mu.Lock()
	// A database that did not answer keeps the slots it was known to hold.
	for k, o := range owner {
		if o < 0 && k < len(s.owner) && s.owner[k] >= 0 {
			owner[k] = s.owner[k]
		}
	}
	s.owner, s.ownersAt = owner, time.Now()
	s.mu.Unlock()
	return owner, nil
}

// slotState is a row of leafd_slot.
type slotState struct {
	Slot  int64  `db:"slot"`
	State string `db:"state"`
}

// slotStates reads every slot's state in d.
func (d *shardDB) slotStates(ctx context.Context) ([]slotState, error) {
	var rows []slotState
	err := d.x.SelectContext(ctx, &rows, d.q(slotStatesSQL))
	return rows, d.Wrap(err, "read leafd_slot")
}

// usable reports whether d's record matches the deployment's, reading it
// the first time d answers; a database whose record does not match is
// never used, and logged.
func (s *Store) usable(ctx context.Context, d *shardDB) bool {
	s.mu.Lock()
	ok, deployment := d.verified, s.deployment
	s.mu.Unlock()
	if ok {
		return true
	}
	m, found, err := d.readMeta(ctx)
	if err != nil || !found {
		return false // not reachable, or not initialised
	}
	id, err := d.identity(ctx, false)
	if err != nil {
		return false
	}
	s.mu.Lock()
	members := s.members
	s.mu.Unlock()
	// The database the deployment's list names at this place: not another
	// one, nor this one emptied and used again.
	named := d.idx >= len(members) || id == members[d.idx]
	if deployment != "" && m.Deployment != deployment || m.Slots != s.slots || m.Index != d.idx || !named || !agree(m.members(), members) {
		s.log.Error("store: a database of store.shards does not match the others; it is not used",
			"shard", d.idx, "deployment", m.Deployment, "slots", m.Slots, "index", m.Index, "named_by_members", named,
			"want_deployment", deployment, "want_slots", s.slots)
		return false
	}
	s.mu.Lock()
	s.deployment = cmp.Or(s.deployment, m.Deployment)
	if len(m.members()) > len(s.members) {
		s.members = m.members()
	}
	d.verified = s.deployment == m.Deployment
	ok = d.verified
	s.mu.Unlock()
	return ok
}

// Migrate applies the migrations to every database that answers, gives
// each its id, and then initialises sharding if no database is
// initialised, or completes an initialisation or an extension to more
// databases that was interrupted. Initialisation places slot k in
// store.shards[k mod N] and copies every tag's definition to every
// database, its max_id the largest any database had. It needs every
// database to answer; otherwise databases that do not answer are passed
// over.
//
// Errors: store_unavailable when no database answers or initialisation
// cannot reach them all; an error wrapping ErrMismatch when the
// databases do not match store.shards.
func (s *Store) Migrate(ctx context.Context) error {
	var down []error
	for i, d := range s.dbs {
		err := d.Migrate(ctx)
		if err == nil {
			_, err = d.identity(ctx, true)
		}
		if err != nil {
			down = append(down, fmt.Errorf("store.shards[%d]: %w", i, err))
			if leafd.ErrorCode(err) != leafd.EStoreUnavailable {
				return err
			}
		}
	}
	if len(down) == len(s.dbs) {
		return s.unavailable(down)
	}
	metas, errs, ids, err := s.metas(ctx)
	if err != nil {
		return err
	}
	deployment, err := s.check(metas, errs, ids)
	if err != nil {
		return err
	}
	members := strings.Join(ids, ",")
	ready, missing, settled := false, false, true
	for i, m := range metas {
		ready = ready || (m != nil && m.State == shardReady)
		missing = missing || (m == nil && errs[i] == nil)
		settled = settled && m != nil && m.Members == members && m.State == shardReady
	}
	unreachable := slices.ContainsFunc(errs, func(e error) bool { return e != nil })
	switch {
	case settled:
	case unreachable && (!ready || missing):
		return s.unavailable(slices.DeleteFunc(errs, func(e error) bool { return e == nil }))
	case unreachable:
		// An initialised deployment whose records lack this list (written
		// before member lists were kept, or an extension interrupted): it
		// is written once every database answers.
	default:
		if err := s.claim(ctx, deployment, ids, !ready); err != nil {
			return err
		}
	}
	_, err = s.readOwners(ctx)
	return err
}

// PendingMigrations reports whether any of the databases lacks a migration
// (see the engines' PendingMigrations).
func (s *Store) PendingMigrations(ctx context.Context) (bool, error) {
	for i, d := range s.dbs {
		pending, err := d.PendingMigrations(ctx)
		if err != nil {
			return false, fmt.Errorf("store.shards[%d]: %w", i, err)
		}
		if pending {
			return true, nil
		}
	}
	return false, nil
}

// randomHex returns n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// claim writes the deployment's member list, the ids of store.shards in
// order, into every database with its record, each in one transaction: a
// database without a record gets one (and, when fresh, its slots; every
// tag), one whose record lists the same databases is left as it is, one
// whose record lists fewer (a deployment growing, or a record written
// before lists were kept) gets this list, and one whose record lists
// others is a mismatch. Two servers with different lists therefore cannot
// both succeed: both must write every database they share, and the second
// to reach one of them is refused. The databases are taken in the order of
// their ids, the same for every server, so that one of two such servers
// always succeeds rather than each being refused by the other. A fresh
// initialisation marks the databases ready once all have their record.
// Each step can run again after a crash.
func (s *Store) claim(ctx context.Context, deployment string, ids []string, fresh bool) error {
	if slices.Contains(ids, "") {
		return fmt.Errorf("store.shards[%d] has no id: run leafd migrate", slices.Index(ids, ""))
	}
	deployment = cmp.Or(deployment, randomHex(8))
	tags, marks, err := s.allTags(ctx)
	if err != nil {
		return err
	}
	n := len(s.dbs)
	members := strings.Join(ids, ",")
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(ids[a], ids[b]) })
	for step, i := range order {
		if s.beforeClaim != nil {
			s.beforeClaim(i)
		}
		d := s.dbs[i]
		err := d.WriteTx(ctx, func(ctx context.Context, tx *sqlx.Tx) error {
			var have []shardMeta
			if err := tx.SelectContext(ctx, &have, d.q(shardMetaSQL)); err != nil {
				return err
			}
			if len(have) == 0 {
				state := shardReady
				if fresh {
					state = shardInitialising
				}
				if _, err := tx.ExecContext(ctx, d.q(shardInsertSQL), deployment, s.slots, i, n, state, members); err != nil {
					return duplicateRetries(d, err)
				}
			} else {
				h := have[0]
				same := h.Members == members
				grows := !same && (h.Members == "" || (!fresh && agree(h.members(), ids)))
				if step == 0 && same {
					deployment = h.Deployment // another server with this list got here first
				}
				switch {
				case !same && !grows:
					return mismatch("store.shards[%d] was initialised with another list of databases (%d of them) than store.shards (%d): "+
						"another server with a different store.shards got there first; give every server the deployment's list, in order, "+
						"and see leafd shards status and \"A database left by a refused initialisation\" in docs/shards.md", i, len(h.members()), n)
				case h.Deployment != deployment:
					return mismatch("store.shards[%d] belongs to another deployment (%s) than the databases before it (%s)", i, h.Deployment, deployment)
				case h.Slots != s.slots:
					return mismatch("store.shards[%d] records %d slots, store.shard_slots is %d: set store.shard_slots to %d", i, h.Slots, s.slots, h.Slots)
				case h.Index != i:
					return mismatch("store.shards[%d] is the database recorded as number %d of the deployment: keep store.shards in the order it was initialised in", i, h.Index)
				case fresh && h.Count != n:
					return mismatch("another server is initialising sharding with %d databases; store.shards lists %d", h.Count, n)
				case grows:
					// The record lists fewer databases, or none: this list,
					// if no other server wrote another since it was read.
					if k, err := affected(tx.ExecContext(ctx, d.q(shardMembersSQL), members, n, h.Members)); err != nil {
						return err
					} else if k == 0 {
						return store.Retry(errors.New("leafd_shard.members changed while it was written"))
					}
				}
			}
			if fresh {
				for k := int64(i); k < s.slots; k += int64(n) {
					if err := ensureSlot(ctx, d, tx, k, slotActive); err != nil {
						return duplicateRetries(d, err)
					}
				}
			}
			if fresh || len(have) == 0 {
				if err := d.CopyTags(ctx, tx, tags, marks); err != nil {
					return duplicateRetries(d, err)
				}
			}
			return nil
		})
		if errors.Is(err, ErrMismatch) {
			return err
		}
		if err != nil {
			return d.Wrap(err, fmt.Sprintf("initialise sharding in store.shards[%d]", i))
		}
	}
	if fresh {
		for i, d := range s.dbs {
			if _, err := d.x.ExecContext(ctx, d.q(shardStateSQL), shardReady, members); err != nil {
				return d.Wrap(err, fmt.Sprintf("initialise sharding in store.shards[%d]", i))
			}
		}
		s.log.Info("store: sharding initialised", "deployment", deployment, "databases", n, "slots", s.slots, "tags", len(tags))
	} else {
		s.log.Info("store: the deployment's databases recorded in each; move slots to added ones with leafd shards move", "databases", n)
	}
	return nil
}

// duplicateRetries turns a duplicate key, hit when another server wrote
// the same row at the same moment, into a retry of the transaction.
func duplicateRetries(d *shardDB, err error) error {
	if d.Duplicate(err) {
		return store.Retry(err)
	}
	return err
}

// affected returns the rows a statement changed, from ExecContext's
// results.
func affected(res sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// q returns query in the database's placeholders.
func (d *shardDB) q(query string) string { return d.x.Rebind(query) }

// ensureSlot makes slot k's row exist with state, unless it exists.
func ensureSlot(ctx context.Context, d *shardDB, tx *sqlx.Tx, k int64, state string) error {
	var have []string
	if err := tx.SelectContext(ctx, &have, d.q(slotStateSQL), k); err != nil {
		return err
	}
	if len(have) > 0 {
		return nil
	}
	_, err := tx.ExecContext(ctx, d.q(slotInsertSQL), k, state)
	return err
}

// allTags returns every tag of every database, each with the largest
// max_id or high-water mark any of them has, and the largest high-water
// mark any of them has of every name, a tag deleted before included.
// Every database must answer.
func (s *Store) allTags(ctx context.Context) ([]leafd.Tag, map[string]int64, error) {
	byName, marks := map[string]leafd.Tag{}, map[string]int64{}
	for i, d := range s.dbs {
		tags, err := d.ListTags(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("store.shards[%d]: %w", i, err)
		}
		mark, err := d.Marks(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("store.shards[%d]: %w", i, err)
		}
		for name, m := range mark {
			marks[name] = max(marks[name], m)
		}
		for _, t := range tags {
			t.MaxID = max(t.MaxID, mark[t.Name])
			if have, ok := byName[t.Name]; !ok || t.MaxID > have.MaxID {
				byName[t.Name] = t
			}
		}
	}
	out := make([]leafd.Tag, 0, len(byName))
	for _, t := range byName {
		out = append(out, t)
		marks[t.Name] = max(marks[t.Name], t.MaxID)
	}
	slices.SortFunc(out, func(a, b leafd.Tag) int { return strings.Compare(a.Name, b.Name) })
	return out, marks, nil
}

// ---------------------------------------------------------------------------
// Allocation

// errSlotNotHere is an allocation from a slot that is not active in the
// database asked: it moved.
var errSlotNotHere = errors.New("the slot is not active in this database")

// Allocate hands out a range of step IDs of tag from one slot: IDs that
// are the slot modulo S, Start, Start+S, … below End, all above every ID
// this store handed out for tag before. It tries the slots in turn, per tag
// starting after the last one used, passing over databases that failed in
// the last second, and moves on to another database at once when one
// fails.
//
// Errors: unknown_tag when no database that answered has the tag (and all
// answered); tag_exhausted when no slot can hold another range;
// store_unavailable when no database could serve it.
func (s *Store) Allocate(ctx context.Context, tag string, step int64) (segment.Allocation, error) {
	return s.allocate(ctx, tag, step, true)
}

var _ segment.AnyOrderStore = (*Store)(nil)

// AllocateIn refuses: a dated tag's counter starts at the first number of
// each period and counts up from there in one database, and a sharded
// store's slots each hand out every S-th number from their own counters.
// CreateTag refuses dated tags; this answers range_unsupported for one made
// by SQL.
func (s *Store) AllocateIn(ctx context.Context, tag string, step int64, within func(time.Time) (segment.Window, error)) (segment.Allocation, error) {
	return segment.Allocation{}, leafd.Errorf(leafd.ERangeUnsupported,
		"tag %q is dated, and a sharded store (store.shards) cannot serve a dated tag: its numbers must count up from 1 in each "+
			"period in one database, while the slots of store.shards each hand out their own; serve it from a store of one database", tag)
}

// AllocateAnyOrder is Allocate without raising the slot above the IDs this
// server was handed before from the other slots: each slot's IDs are used
// up in turn, none passed over. The allocator asks it for opaque tags,
// whose IDs have no order to keep and whose domain may be small.
func (s *Store) AllocateAnyOrder(ctx context.Context, tag string, step int64) (segment.Allocation, error) {
	return s.allocate(ctx, tag, step, false)
}

// allocate is Allocate; ordered raises the slot above the tag's floor.
func (s *Store) allocate(ctx context.Context, tag string, step int64, ordered bool) (segment.Allocation, error) {
	if step < 1 {
		return segment.Allocation{}, fmt.Errorf("store: allocate %q: step %d is below 1", tag, step)
	}
	owner, err := s.owners(ctx)
	if err != nil {
		return segment.Allocation{}, err
	}
	s.mu.Lock()
	floor, first := s.floors[tag], s.cursor[tag]
	s.mu.Unlock()
	if !ordered {
		floor = 0 // the slot's own counter is the only bound
	}

	var errs []error
	unknown, exhausted, answered, tried := 0, 0, 0, 0
	repaired := false
	for pass := range 2 { // the second pass, only if the first tried nothing, takes databases marked down too
		if pass == 1 && tried > 0 {
			break
		}
		for n := range int(s.slots) {
			k := (first + n) % int(s.slots)
			di := owner[k]
			if di < 0 || (pass == 0 && s.isDown(di)) {
				continue
			}
			tried++
			actx, cancel := s.attemptContext(ctx, di, owner)
			a, err := s.allocSlot(actx, s.dbs[di], int64(k), tag, step, floor)
			if leafd.ErrorCode(err) == leafd.EUnknownTag && !repaired {
				// The database missed the tag's creation (it was down):
				// copied from one that has it, and the slot tried again.
				repaired = true
				if s.repairTag(actx, di, tag) {
					a, err = s.allocSlot(actx, s.dbs[di], int64(k), tag, step, floor)
				}
			}
			cancel()
			switch {
			case err == nil:
				s.mu.Lock()
				s.floors[tag] = max(s.floors[tag], a.Last())
				s.cursor[tag] = (k + 1) % int(s.slots)
				s.dbs[di].downFor = 0
				s.mu.Unlock()
				return a, nil
			case errors.Is(err, errSlotNotHere):
				owner, _ = s.readOwners(ctx)
				continue
			case leafd.ErrorCode(err) == leafd.EUnknownTag:
				unknown++
				answered++
			case leafd.ErrorCode(err) == leafd.ETagExhausted:
				exhausted++
				answered++
			case leafd.ErrorCode(err) == leafd.EStoreUnavailable:
				s.markDown(di, err)
			default:
				answered++
			}
			errs = append(errs, err)
			if ctx.Err() != nil {
				return segment.Allocation{}, s.unavailable(errs)
			}
		}
	}
	switch {
	case answered > 0 && unknown == answered:
		return segment.Allocation{}, leafd.UnknownTagError(tag)
	case answered > 0 && exhausted+unknown == answered:
		return segment.Allocation{}, leafd.Errorf(leafd.ETagExhausted,
			"tag %q is exhausted: no slot can hold a range of %d more IDs below the largest ID, %d", tag, step, leafd.MaxID)
	}
	return segment.Allocation{}, s.unavailable(errs)
}

// repairTag copies tag's definition to database i from another database
// that has it, and reports whether it did.
func (s *Store) repairTag(ctx context.Context, i int, tag string) bool {
	for j, d := range s.dbs {
		if j == i {
			continue
		}
		t, err := d.LookupTag(ctx, tag)
		if err != nil {
			continue
		}
		_, err = s.dbs[i].CreateTag(ctx, t)
		if err == nil || leafd.ErrorCode(err) == leafd.ETagExists {
			s.log.Info("store: copied a tag to a database of store.shards that missed it", "tag", tag, "shard", i)
			return true
		}
		return false
	}
	return false
}

// owners returns the slot placement, read again when it is older than
// s.refresh.
func (s *Store) owners(ctx context.Context) ([]int, error) {
	s.mu.Lock()
	owner, at, refresh := s.owner, s.ownersAt, s.refresh
	s.mu.Unlock()
	if owner != nil && time.Since(at) < refresh {
		return owner, nil
	}
	owner, err := s.readOwners(ctx)
	if err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(owner, func(o int) bool { return o >= 0 }) {
		if err := s.Ping(ctx); err != nil {
			return nil, err // none answers: say so, not "run leafd migrate"
		}
		return nil, leafd.Errorf(leafd.EStoreUnavailable,
			"no slot of store.shards is active in a database that answered: run leafd migrate to initialise sharding, or see leafd shards status")
	}
	return owner, nil
}

func (s *Store) isDown(i int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Now().Before(s.dbs[i].downUntil)
}

// markDown passes database i over: for shardDownFor, or twice as long as
// the last time when it failed again after that.
func (s *Store) markDown(i int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.dbs[i]
	now := time.Now()
	if now.Before(d.downUntil) {
		return // other loads that were in flight on it
	}
	d.downFor = min(max(2*d.downFor, shardDownFor), shardDownMax)
	d.downUntil = now.Add(d.downFor)
	s.log.Warn("store: a database of store.shards failed; its slots are passed over", "shard", i, "for", d.downFor, "err", err)
}

// markUp ends database i's pass-over: it answered.
func (s *Store) markUp(i int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dbs[i].downUntil, s.dbs[i].downFor = time.Time{}, 0
}

// attemptContext bounds an attempt on database i by the attempt timeout
// when another database that is not passed over holds a slot: that one can
// serve if this one hangs. The last database that can serve gets the
// caller's whole time.
func (s *Store) attemptContext(ctx context.Context, i int, owner []int) (context.Context, context.CancelFunc) {
	s.mu.Lock()
	now := time.Now()
	others := slices.ContainsFunc(owner, func(o int) bool { return o >= 0 && o != i && !now.Before(s.dbs[o].downUntil) })
	s.mu.Unlock()
	if !others {
		return ctx, func() {}
	}
	return s.bounded(ctx)
}

// baseRow is a tag's leaf_alloc row as a slot's load reads it (tagBaseSQL).
type baseRow struct {
	Name  string `db:"biz_tag"`
	MaxID int64  `db:"max_id"`
	Step  int64  `db:"step"`
}

// alignUp returns the smallest ID at or above v that is k modulo S.
func alignUp(v, k, S int64) int64 {
	return v + ((k-v%S)%S+S)%S
}

// allocSlot runs one range load of tag from slot k in database d: it
// checks, under a shared lock, that the slot is active there (so that a
// move waits for the loads in flight and none starts after it), creates
// the tag's counter of the slot if it has none, and advances it by step*S
// from at least the first of the slot's IDs above floor. A database whose
// id is no longer the one the deployment records at its place (emptied
// and used again, or replaced, since it was checked) serves nothing: the
// load is errSlotNotHere, and the database is checked again.
func (s *Store) allocSlot(ctx context.Context, d *shardDB, k int64, tag string, step, floor int64) (segment.Allocation, error) {
	S := s.slots
	span := step * S
	from := alignUp(max(floor+1, 1), k, S)
	s.mu.Lock()
	want := "" // the id the deployment records at d's place
	if d.idx < len(s.members) {
		want = s.members[d.idx]
	}
	s.mu.Unlock()
	var a segment.Allocation
	replaced := false
	err := d.WriteTx(ctx, func(ctx context.Context, tx *sqlx.Tx) error {
		var state []string
		if err := tx.SelectContext(ctx, &state, d.q(slotStateSQL+d.ShareSuffix()), k); err != nil {
			return err
		}
		if len(state) == 0 || state[0] != slotActive {
			return errSlotNotHere
		}
		// Still the database that was checked: one emptied and used
		// again, or replaced, while this server runs has another id, and
		// its slots' counters are not this deployment's.
		if want != "" {
			var uid []string
			if err := tx.SelectContext(ctx, &uid, d.q(identitySQL)); err != nil {
				return err
			}
			if len(uid) == 0 || uid[0] != want {
				replaced = true
				return errSlotNotHere
			}
		}
		var base []baseRow
		if err := tx.SelectContext(ctx, &base, d.q(tagBaseSQL), tag); err != nil {
			return err
		}
		i := slices.IndexFunc(base, func(r baseRow) bool { return r.Name == tag })
		if i < 0 {
			return leafd.UnknownTagError(tag)
		}
		exhausted := func() error {
			return leafd.Errorf(leafd.ETagExhausted, "tag %q: slot %d cannot hold a range of %d more IDs", tag, k, step)
		}
		if step > leafd.MaxID/S { // step*S would overflow
			return exhausted()
		}
		advance := func() (int64, error) {
			return affected(tx.ExecContext(ctx, d.q(fmt.Sprintf(slotAllocSQL, d.Greatest())), from, span, tag, k, from, leafd.MaxID-span))
		}
		n, err := advance()
		if err != nil {
			return err
		}
		if n == 0 {
			var have []int64
			if err := tx.SelectContext(ctx, &have, d.q(slotReadSQL), tag, k); err != nil {
				return err
			}
			if len(have) > 0 {
				return exhausted()
			}
			// The slot's first range of the tag: its counter starts at the
			// tag's base, or at its high-water mark if that is higher (the
			// IDs the tag issued from one database before it grew into
			// store.shards, its max_id lowered by SQL since).
			var marks []int64
			if err := tx.SelectContext(ctx, &marks, d.q(tagMarkSQL), tag); err != nil {
				return err
			}
			start := alignUp(max(base[i].MaxID, slices.Max(append(marks, 1))), k, S)
			if _, err := tx.ExecContext(ctx, d.q(slotRowInsertSQL), tag, k, start); err != nil {
				return duplicateRetries(d, err) // created at the same moment by another server
			}
			if n, err = advance(); err != nil {
				return err
			}
			if n == 0 {
				return exhausted()
			}
		}
		var end int64
		if err := tx.GetContext(ctx, &end, d.q(slotReadSQL), tag, k); err != nil {
			return err
		}
		a = segment.Allocation{Start: end - span, End: end, Stride: S, TableStep: base[i].Step}
		return nil
	})
	if replaced {
		// Checked again (and refused) when the slots are next read.
		s.mu.Lock()
		d.verified = false
		s.mu.Unlock()
	}
	if errors.Is(err, errSlotNotHere) {
		return segment.Allocation{}, err
	}
	if err != nil {
		return segment.Allocation{}, d.Wrap(err, fmt.Sprintf("allocate %q from slot %d", tag, k))
	}
	// The tag's format (Allocation.Format), read once the range is
	// committed: the tag has a past then, so its format is that of the row
	// the range came from for good.
	t, err := d.LookupTag(ctx, tag)
	if err != nil {
		return segment.Allocation{}, err
	}
	a.Format = t.Format
	return a, nil
}

// ---------------------------------------------------------------------------
// Tags: every database holds every tag's definition, and they agree.
//
// A tag's format, domain and key must be the same in every database: each
// database's slots map their counters by the definition the server read,
// so two definitions would hand out IDs of two formats, whose values meet.
// A tag is created in every database or refused, store.shards[0] first, so
// that of two servers creating it at once only one gets past it; a tag
// that databases define differently (written by SQL, or by an older
// leafd) is served by none of them.
//
// Reading a tag does not wait for a database that does not answer: one
// that fails, or gives no answer within an attempt, is left out as one
// that is gone is, and so is one passed over; the tag is served by the
// definition of the databases that answered, when at least one of them
// has it and all that have it agree. That serves no other definition
// than every database's word would, because leafd never writes two
// definitions of a tag: CreateTag writes one only after every database
// answered that it has none, store.shards[0] first, which refuses the
// second of two servers creating the tag at once; repairTag and Migrate
// only copy a definition that exists. So a database that is not heard
// holds the definition the others hold, or none (it missed the creation),
// not another. Only a definition written past leafd (by SQL, or by an
// older leafd) can differ, and waiting for a database that does not
// answer would not reveal it either: it is found when the database
// answers again, and the tag is then refused (tag_conflict). When none
// that answered has the tag and one was not heard, the tag may still be
// there alone (the others missed its creation): store_unavailable, not
// unknown_tag.

// ask runs f on databases of store.shards at once and returns each
// database's error, nil for one that answered: on every database with
// every, otherwise on those not passed over (all of them when every one
// is), the others' error saying so. Each gets the attempt timeout when
// another asked can answer (with every, always), so that one that hangs
// holds the answer up by one attempt at most, and one that fails or gives
// no answer in time is passed over from then on, as a range load passes
// it over; one that answers is used again at once.
func (s *Store) ask(ctx context.Context, every bool, f func(ctx context.Context, d *shardDB) error) []error {
	errs := make([]error, len(s.dbs))
	live, nlive := make([]bool, len(s.dbs)), 0
	for i := range s.dbs {
		if live[i] = !s.isDown(i); live[i] {
			nlive++
		}
	}
	var wg sync.WaitGroup
	for i, d := range s.dbs {
		if !every && !live[i] && nlive > 0 {
			errs[i] = leafd.Errorf(leafd.EStoreUnavailable, "store.shards[%d] failed or did not answer in time a moment ago, and is passed over for now", i)
			continue
		}
		others := nlive
		if live[i] {
			others--
		}
		wg.Go(func() {
			actx, cancel := ctx, context.CancelFunc(func() {})
			if others > 0 || every {
				actx, cancel = s.bounded(ctx)
			}
			errs[i] = f(actx, d)
			hung := actx.Err() != nil
			cancel()
			if errs[i] == nil || !hung && leafd.ErrorCode(errs[i]) != leafd.EStoreUnavailable {
				s.markUp(i) // it answered
			} else if ctx.Err() == nil {
				s.markDown(i, errs[i])
			}
		})
	}
	wg.Wait()
	return errs
}

// bounded bounds one step on one database by the attempt timeout.
func (s *Store) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.attempt <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.attempt)
}

// disagreement returns the tag_conflict error of tag when the definitions
// found in the databases of store.shards where differ in format, domain or
// key, and nil when they agree.
func disagreement(tags []leafd.Tag, where []int) error {
	says := func(i int) string { return fmt.Sprintf("store.shards[%d]: %s", where[i], store.Definition(tags[i])) }
	for i := 1; i < len(tags); i++ {
		if store.Definition(tags[i]) != store.Definition(tags[0]) {
			return leafd.Errorf(leafd.ETagConflict, "tag %q is defined differently by the databases of store.shards (%s; %s): "+
				"no ID of it is handed out. Make every database hold the definition its IDs were issued under (its row in "+
				"leafd_tag_format, or none for a sequential tag)", tags[0].Name, says(0), says(i))
		}
	}
	return nil
}

// ListTags returns every tag of the databases that answer (see ask: one
// that hangs costs an attempt, one passed over nothing), each as the first
// of them holds it. MaxID is the tag's base, not how far its slots have
// gone. A tag whose definitions disagree is left out (and logged): its
// requests then look it up, and LookupTag refuses it.
func (s *Store) ListTags(ctx context.Context) ([]leafd.Tag, error) {
	lists := make([][]leafd.Tag, len(s.dbs))
	asked := s.ask(ctx, false, func(ctx context.Context, d *shardDB) (err error) {
		lists[d.idx], err = d.ListTags(ctx)
		return err
	})
	var errs []error
	byName := map[string][]leafd.Tag{}
	where := map[string][]int{}
	for i, tags := range lists {
		if err := asked[i]; err != nil {
			errs = append(errs, fmt.Errorf("store.shards[%d]: %w", i, err))
			continue
		}
		for _, t := range tags {
			byName[t.Name] = append(byName[t.Name], t)
			where[t.Name] = append(where[t.Name], i)
		}
	}
	if len(errs) == len(s.dbs) { // none answered
		return nil, s.unavailable(errs)
	}
	out := make([]leafd.Tag, 0, len(byName))
	for name, defs := range byName {
		if err := disagreement(defs, where[name]); err != nil {
			s.log.Error("store: a tag is not served", "tag", name, "err", err)
			continue
		}
		out = append(out, defs[0])
	}
	slices.SortFunc(out, func(a, b leafd.Tag) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// TagNames returns the name of every tag of the databases that answer.
func (s *Store) TagNames(ctx context.Context) ([]string, error) {
	tags, err := s.ListTags(ctx)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(tags))
	for i, t := range tags {
		names[i] = t.Name
	}
	return names, nil
}

// LookupTag returns the tag as the first database that has it holds it,
// once every database that answers agrees on its definition. A database
// that hangs costs an attempt, one passed over nothing (see ask, and why
// the others' word is enough above).
//
// Errors: unknown_tag when every database answered and none has it;
// tag_conflict when databases define it differently; store_unavailable when
// none that answered has it and some did not answer.
func (s *Store) LookupTag(ctx context.Context, name string) (leafd.Tag, error) {
	tags := make([]leafd.Tag, len(s.dbs))
	asked := s.ask(ctx, false, func(ctx context.Context, d *shardDB) (err error) {
		tags[d.idx], err = d.LookupTag(ctx, name)
		return err
	})
	var (
		errs  []error
		found []leafd.Tag
		where []int
	)
	for i, err := range asked {
		switch {
		case err == nil:
			found, where = append(found, tags[i]), append(where, i)
		case leafd.ErrorCode(err) != leafd.EUnknownTag:
			errs = append(errs, err)
		}
	}
	switch {
	case len(found) > 0:
		if err := disagreement(found, where); err != nil {
			return leafd.Tag{}, err
		}
		return found[0], nil
	case len(errs) == 0:
		return leafd.Tag{}, leafd.UnknownTagError(name)
	}
	return leafd.Tag{}, s.unavailable(errs)
}

// CreateTag creates the tag in every database. Every database must answer
// and none may have it (or a past under its name that refuses it) before
// any is written; its max_id is the highest of their marks. They are asked
// at once, each for an attempt at most, passed over or not: one that hangs
// makes the creation refused within an attempt. The databases are then
// written in order, each within an attempt: store.shards[0] decides
// between servers that create the tag at once. A database that fails after
// store.shards[0] took the tag is given the same definition at its first
// load (repairTag) or the next leafd migrate: never another.
//
// Errors: invalid_body for a dated tag (see AllocateIn); tag_exists when any
// database has the tag; tag_conflict when a
// database's past of the name refuses it (CreateTag of the engines); those
// of the engine's CreateTag from store.shards[0]; store_unavailable when a
// database does not answer (and none that answered refused the tag).
func (s *Store) CreateTag(ctx context.Context, t leafd.Tag) (leafd.Tag, error) {
	if err := leafd.ValidateTag(t.Name); err != nil {
		return leafd.Tag{}, err
	}
	if t.Format == segment.FormatDated {
		return leafd.Tag{}, leafd.Errorf(leafd.EInvalidBody, "tag %q cannot be dated in a sharded store (store.shards): "+
			"a dated tag's numbers count up from 1 in each period in one database, while the slots of store.shards each hand out their own; "+
			"create it in a store of one database, or as a sequential tag", t.Name)
	}
	marks := make([]int64, len(s.dbs))
	errs := s.ask(ctx, true, func(ctx context.Context, d *shardDB) error {
		mark, err := d.Creatable(ctx, t)
		marks[d.idx] = mark
		return d.Wrap(err, fmt.Sprintf("check tag %q in store.shards[%d]", t.Name, d.idx))
	})
	// A database's refusal is the answer whether or not another answered.
	for _, err := range errs {
		if err != nil && leafd.ErrorCode(err) != leafd.EStoreUnavailable {
			return leafd.Tag{}, err
		}
	}
	for i, err := range errs {
		if err != nil {
			return leafd.Tag{}, leafd.Wrap(leafd.EStoreUnavailable, err, fmt.Sprintf(
				"tag %q was not created: store.shards[%d] does not answer (%s), and a tag is created in every database "+
					"of store.shards or in none, so that no database can hold another definition of it; retry once it answers",
				t.Name, i, leafd.ErrorMessage(err)))
		}
		t.MaxID = max(t.MaxID, marks[i])
	}
	var created *leafd.Tag
	for i, d := range s.dbs {
		wctx, cancel := s.bounded(ctx)
		got, err := d.CreateTag(wctx, t)
		cancel()
		switch {
		case err == nil && created == nil:
			created = &got
		case err == nil:
		case i == 0:
			return leafd.Tag{}, err // refused by the arbiter: nothing written
		default:
			s.log.Warn("store: a database of store.shards missed a tag's creation; it gets the tag at its first load from it",
				"tag", t.Name, "shard", i, "err", err)
		}
	}
	return *created, nil
}

// UpdateTag changes the tag in every database that answers within an
// attempt, and returns the first one's before and after.
func (s *Store) UpdateTag(ctx context.Context, name string, u leafd.TagUpdate) (old, updated leafd.Tag, err error) {
	var errs []error
	done := false
	for _, d := range s.dbs {
		uctx, cancel := s.bounded(ctx)
		o, n, err := d.UpdateTag(uctx, name, u)
		cancel()
		switch {
		case err == nil && !done:
			old, updated, done = o, n, true
		case err == nil:
		case leafd.ErrorCode(err) == leafd.EStoreUnavailable:
			errs = append(errs, err)
		case !done:
			return leafd.Tag{}, leafd.Tag{}, err
		}
	}
	if !done {
		return leafd.Tag{}, leafd.Tag{}, s.unavailable(errs)
	}
	return old, updated, nil
}

// RepairTag of a sharded store: its tags' IDs come from the slots'
// counters (leafd_slot_alloc), which leafd alone writes and which keep no
// high-water mark, so a lowered max_id in leaf_alloc (only the base the
// slots start above, with the tag's mark) rewinds nothing, and there is
// nothing this action could raise.
//
// Errors: invalid_tag for a bad name; unknown_tag when no database has the
// tag; store_unavailable when none answered; range_unsupported otherwise.
func (s *Store) RepairTag(ctx context.Context, name string) (store.Repair, error) {
	if err := leafd.ValidateTag(name); err != nil {
		return store.Repair{}, err
	}
	if _, err := s.LookupTag(ctx, name); err != nil {
		return store.Repair{}, err
	}
	return store.Repair{}, leafd.Errorf(leafd.ERangeUnsupported,
		"tag %q is in a sharded store (store.shards): its IDs come from the slots' counters, which keep no high-water mark "+
			"and are not moved back by a change of leaf_alloc: there is nothing to repair", name)
}

// ---------------------------------------------------------------------------
// Snowflake worker id leases live in the first database.

// leases returns the first database once its record shows it is the
// deployment's first: a server whose store.shards starts with another
// database, or whose databases are not initialised yet (store.migrate
// false), would lease worker ids from a table that other servers do not
// see, and issue the same snowflake IDs as they do.
//
// Its id is read at every claim (claims are rare): a database emptied or
// replaced while servers run has lost the leases and their watermarks, and
// a claim there could take a worker id that a running server still issues
// under.
func (s *Store) leases(ctx context.Context) (*shardDB, error) {
	d := s.dbs[0]
	if !s.usable(ctx, d) {
		return nil, errors.New("store.shards[0] holds the worker id leases, but it does not answer, has no record of the deployment " +
			"(run leafd migrate to initialise sharding), or is not the deployment's first database (see leafd shards status)")
	}
	id, err := d.identity(ctx, false)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	replaced := len(s.members) > 0 && s.members[0] != "" && id != s.members[0]
	s.mu.Unlock()
	if replaced {
		return nil, mismatch("store.shards[0], which holds the worker id leases, is not the database the deployment recorded at that place " +
			"(emptied and used again, or replaced, while servers ran): restore it from a backup; see \"When a database is lost for good\" in docs/shards.md")
	}
	return d, nil
}

// ClaimWorker claims a worker id in the first database.
func (s *Store) ClaimWorker(ctx context.Context, c snowflake.Claim) (snowflake.Lease, error) {
	d, err := s.leases(ctx)
	if err != nil {
		return snowflake.Lease{}, err
	}
	return d.ClaimWorker(ctx, c)
}

// ClaimFixedWorker claims a fixed worker id in the first database.
func (s *Store) ClaimFixedWorker(ctx context.Context, c snowflake.FixedClaim) (snowflake.Lease, error) {
	d, err := s.leases(ctx)
	if err != nil {
		return snowflake.Lease{}, err
	}
	return d.ClaimFixedWorker(ctx, c)
}

// firstDB is what the first database serves for the whole store as it
// is: the renewal and release of the worker id leases claimed there, and
// the access tokens.
type firstDB interface {
	RenewWorker(ctx context.Context, l snowflake.Lease, ttl time.Duration, watermarkMs int64) error
	ReleaseWorker(ctx context.Context, l snowflake.Lease, watermarkMs int64) error
	CreateToken(ctx context.Context, tags []string, description string) (store.Token, string, error)
	ListTokens(ctx context.Context) ([]store.Token, error)
	RevokeToken(ctx context.Context, id string) error
}

// CheckNotShard returns an error wrapping ErrMismatch when s, a store
// of one database, is pointed at a database of store.shards: serving from
// leaf_alloc there would hand out again the IDs its slots hand out. A
// database without a record, or without the sharding tables, passes; one
// that does not answer is the error of the read, which says nothing of it.
func CheckNotShard(ctx context.Context, s store.Store) error {
	var d store.Node
	switch st := s.(type) {
	case *Store:
		return nil // Verify checks its records
	case store.Node:
		d = st
	default:
		// Fail closed: a store this cannot look into may be a shard.
		return fmt.Errorf("sharded: cannot tell whether a %T is pointed at a database of store.shards", s)
	}
	var m shardMeta
	err := d.DB().GetContext(ctx, &m, d.DB().Rebind(shardPlaceSQL))
	switch {
	case errors.Is(err, sql.ErrNoRows), store.MissingTable(err):
		return nil
	case err != nil:
		return d.Wrap(err, "read leafd_shard")
	}
	return mismatch("the database is store.shards[%d] of a deployment of %d databases (%s): serving it alone would hand out its slots' IDs again; "+
		"set store.shards to the deployment's databases", m.Index, m.Count, m.Deployment)
}
