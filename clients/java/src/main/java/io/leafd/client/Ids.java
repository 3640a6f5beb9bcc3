package io.leafd.client;

import java.util.Arrays;
import java.util.List;
import java.util.Map;

/** Strict readers of the ID answers: decimal strings, no sign, no leading zero, 1 to 2^63-1. */
final class Ids {
    private Ids() {}

    static long parseId(Object v, String what) {
        if (!(v instanceof String)) {
            throw bad(what + " is not a JSON string: " + v);
        }
        String s = (String) v;
        if (s.isEmpty() || s.length() > 19 || s.charAt(0) == '0') {
            throw bad(what + " is not an ID: \"" + s + "\"");
        }
        for (int k = 0; k < s.length(); k++) {
            char c = s.charAt(k);
            if (c < '0' || c > '9') {
                throw bad(what + " is not an ID: \"" + s + "\"");
            }
        }
        try {
            return Long.parseLong(s);
        } catch (NumberFormatException e) {
            throw bad(what + " is past 2^63-1: \"" + s + "\"");
        }
    }

    /** The "ids" of a segment or snowflake answer: exactly n, none twice, returned ascending. */
    static long[] parseIds(String body, int n, String tag) {
        Map<?, ?> m = object(body);
        if (tag != null && !tag.equals(m.get("tag"))) {
            throw bad("answer for tag " + m.get("tag") + ", asked for " + tag);
        }
        Object l = m.get("ids");
        if (!(l instanceof List)) {
            throw bad("answer without \"ids\"");
        }
        List<?> list = (List<?>) l;
        if (list.size() != n) {
            throw bad("asked for " + n + " IDs, got " + list.size());
        }
        long[] ids = new long[n];
        for (int k = 0; k < n; k++) {
            ids[k] = parseId(list.get(k), "ids[" + k + "]");
        }
        // An opaque tag's batch comes in no particular order.
        Arrays.sort(ids);
        for (int k = 1; k < n; k++) {
            if (ids[k] == ids[k - 1]) {
                throw bad("ID " + ids[k] + " twice in one answer");
            }
        }
        return ids;
    }

    /**
     * A range answer {"tag","start","end"}: [start, end) of exactly size IDs. A range that expires
     * (a dated tag's, with "valid_ms") is refused as range_unsupported: this client does not track
     * a range's validity, so it never hands out such a range's IDs and asks for batches instead.
     * The server leases such a range only to a request with expiring=true, which this client never
     * sends (it gets 409 range_unsupported for a dated tag): this check is a second guard.
     */
    static long[] parseRange(String body, String tag, long size) {
        Map<?, ?> m = object(body);
        if (!tag.equals(m.get("tag"))) {
            throw bad("range for tag " + m.get("tag") + ", asked for " + tag);
        }
        if (m.get("valid_ms") != null) {
            throw new LeafdException("range_unsupported", 409, "the range of tag " + tag
                    + " expires (valid_ms: a dated tag's), and this client takes no range that expires;"
                    + " its IDs come from batches");
        }
        long start = parseId(m.get("start"), "start");
        Object e = m.get("end");
        long end;
        if ("9223372036854775808".equals(e)) {
            end = Long.MAX_VALUE; // 2^63: the range ends at the largest ID; its last ID is lost
            if (end - start != size - 1) {
                throw bad("range of " + (end - start + 1) + " IDs, asked for " + size);
            }
            return new long[] {start, end};
        }
        end = parseId(e, "end");
        if (end - start != size) {
            throw bad("range [" + start + ", " + end + ") is not " + size + " IDs");
        }
        return new long[] {start, end};
    }

    static Map<?, ?> object(String body) {
        Object v;
        try {
            v = Json.parse(body);
        } catch (IllegalArgumentException e) {
            throw bad("answer is not JSON: " + e.getMessage());
        }
        if (!(v instanceof Map)) {
            throw bad("answer is not a JSON object");
        }
        return (Map<?, ?>) v;
    }

    static LeafdException bad(String msg) {
        return new LeafdException(LeafdException.BAD_ANSWER, 200, msg);
    }
}
