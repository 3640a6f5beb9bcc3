package io.leafd.client;

/**
 * An error from leafd or from reaching it. Never an ID.
 *
 * <p>{@link #code()} is the server's error code from the contract ({@code unknown_tag},
 * {@code tag_exhausted}, {@code period_exhausted}, {@code token_required}, {@code token_refused},
 * {@code segment_unavailable}, {@code range_unsupported}, …) when a server answered one, or one of
 * the client's own codes:
 *
 * <ul>
 *   <li>{@link #UNREACHABLE}: no server answered (connection refused, timed out, reset);
 *   <li>{@link #BAD_ANSWER}: an answer that is not what the contract says (a proxy's error page,
 *       a malformed ID, the wrong number of IDs);
 *   <li>{@link #CLOSED}: the client was closed;
 *   <li>{@link #INTERRUPTED}: the calling thread was interrupted.
 * </ul>
 *
 * {@link #status()} is the HTTP status of the answer, or 0 when there was none.
 */
public class LeafdException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    /** No server could be reached, or none answered in time. */
    public static final String UNREACHABLE = "unreachable";
    /** An answer that does not follow the contract. */
    public static final String BAD_ANSWER = "bad_answer";
    /** The client was closed. */
    public static final String CLOSED = "closed";
    /** The calling thread was interrupted while it waited. */
    public static final String INTERRUPTED = "interrupted";

    private final String code;
    private final int status;

    public LeafdException(String code, int status, String message) {
        super(message);
        this.code = code;
        this.status = status;
    }

    public LeafdException(String code, int status, String message, Throwable cause) {
        super(message, cause);
        this.code = code;
        this.status = status;
    }

    /** The error code: the contract's, or one of this class's constants. */
    public String code() {
        return code;
    }

    /** The HTTP status of the server's answer, 0 when no server answered. */
    public int status() {
        return status;
    }

    /**
     * Whether asking another server (or the same one later) may give another answer: no server
     * reached, or a 5xx other than {@code tag_exhausted} and {@code period_exhausted}, which every
     * server would answer alike. A retry never returns an ID twice: a server never issues an ID
     * again, so a request that failed after taking IDs only loses them.
     */
    public boolean retryable() {
        if (UNREACHABLE.equals(code)) {
            return true;
        }
        if (status >= 500) {
            return !"tag_exhausted".equals(code) && !"period_exhausted".equals(code);
        }
        return false;
    }

    @Override
    public String toString() {
        return "LeafdException[" + code + (status != 0 ? ", HTTP " + status : "") + "]: " + getMessage();
    }
}
