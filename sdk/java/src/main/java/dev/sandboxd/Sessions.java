// Sessions.java — client.sandbox().sessions(): sessions by id.
package dev.sandboxd;

import dev.sandboxd.model.Session;
import dev.sandboxd.model.SessionList;
import java.time.Duration;

/** Sessions: create, get, list, update (PATCH), delete. */
public final class Sessions {
    private final Transport t;

    Sessions(Transport t) {
        this.t = t;
    }

    /** A session on profile (null: the default one). */
    public SandboxSession create(String profile) {
        return create(new SessionOptions().profile(profile));
    }

    /** Creates a session; it is ready when this returns.  Close it (try-with-resources) to delete it. */
    public SandboxSession create(SessionOptions options) {
        Session s = t.json(new Transport.Call("createSession").json(options.body).expect(201)
            .timeout(max(t.cfg.timeout, Duration.ofSeconds(120))), Session.class);
        return new SandboxSession(t, s);
    }

    public SandboxSession get(String id) {
        return new SandboxSession(t, info(id));
    }

    Session info(String id) {
        return t.json(new Transport.Call("getSession").param("id", id), Session.class);
    }

    /** A handle on a session by id, without asking the daemon. */
    public SandboxSession session(String id) {
        return new SandboxSession(t, Transport.convert(Transport.object().put("id", id), Session.class));
    }

    /** The newest sessions (first page). */
    public SessionList list() {
        return list(null, null, null);
    }

    /** A page of sessions, newest first; any argument may be null. */
    public SessionList list(String status, Integer limit, String cursor) {
        return t.json(new Transport.Call("listSessions").query("status", status).query("limit", limit)
            .query("cursor", cursor), SessionList.class);
    }

    /** Every session of the tenant (status null: any), pages fetched as needed. */
    public Iterable<Session> iterate(String status) {
        return Paging.all(cursor -> {
            SessionList l = list(status, 200, cursor);
            return new Paging.Page<>(l.sessions(), l.nextCursor());
        });
    }

    /** PATCH: only the fields set in patch change. */
    public Session update(String id, SessionPatch patch) {
        return t.json(new Transport.Call("updateSession").param("id", id).json(patch.body), Session.class);
    }

    /** Terminates the session. */
    public void delete(String id) {
        t.send(new Transport.Call("deleteSession").param("id", id).expect(204));
    }

    static Duration max(Duration a, Duration b) {
        return a.compareTo(b) >= 0 ? a : b;
    }
}
