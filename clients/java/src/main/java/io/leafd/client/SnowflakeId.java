package io.leafd.client;

import java.time.Instant;
import java.util.Objects;

/** A snowflake ID decoded by a server with its configured layout ({@code GET /snowflake/{id}}). */
public final class SnowflakeId {
    private final long id;
    private final Instant time;
    private final long workerId;
    private final long sequence;

    public SnowflakeId(long id, Instant time, long workerId, long sequence) {
        this.id = id;
        this.time = Objects.requireNonNull(time, "time");
        this.workerId = workerId;
        this.sequence = sequence;
    }

    public long id() {
        return id;
    }

    /** The millisecond the ID was issued in. */
    public Instant time() {
        return time;
    }

    public long unixMillis() {
        return time.toEpochMilli();
    }

    public long workerId() {
        return workerId;
    }

    public long sequence() {
        return sequence;
    }

    @Override
    public boolean equals(Object o) {
        if (!(o instanceof SnowflakeId)) {
            return false;
        }
        SnowflakeId s = (SnowflakeId) o;
        return id == s.id && time.equals(s.time) && workerId == s.workerId && sequence == s.sequence;
    }

    @Override
    public int hashCode() {
        return Objects.hash(id, time, workerId, sequence);
    }

    @Override
    public String toString() {
        return "SnowflakeId{id=" + id + ", time=" + time + ", workerId=" + workerId + ", sequence=" + sequence + "}";
    }
}
