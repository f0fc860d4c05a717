// SessionFiles.java — a session's files: read, write, list, stat, mkdir, move,
// delete, tar archives both ways, and watches.
package dev.sandboxd;

import dev.sandboxd.model.ArchiveExtracted;
import dev.sandboxd.model.DirEntry;
import dev.sandboxd.model.DirListing;
import dev.sandboxd.model.FileStat;
import dev.sandboxd.model.FileWritten;
import java.nio.charset.StandardCharsets;
import java.util.List;

/** The files of one session (paths absolute, or relative to /work). */
public final class SessionFiles {
    private final Transport t;
    private final String sid;

    SessionFiles(Transport t, String sid) {
        this.t = t;
        this.sid = sid;
    }

    private Transport.Call call(String op, String path) {
        return new Transport.Call(op).param("id", sid).query("path", path);
    }

    /** Writes a file (parents created). */
    public FileWritten put(String path, byte[] data) {
        return t.json(call("writeSessionFile", path).body(data, "application/octet-stream").expect(201),
            FileWritten.class);
    }

    public FileWritten put(String path, String text) {
        return put(path, text.getBytes(StandardCharsets.UTF_8));
    }

    public byte[] get(String path) {
        return t.bytes(call("readSessionFile", path).accept("*/*"));
    }

    public String readText(String path) {
        return new String(get(path), StandardCharsets.UTF_8);
    }

    public List<DirEntry> list(String path) {
        return list(path, false, null);
    }

    /** A directory's entries; recursive lists the tree (maxDepth null: the daemon's bound). */
    public List<DirEntry> list(String path, boolean recursive, Integer maxDepth) {
        return t.json(call("readSessionFile", path).query("list", true).query("recursive", recursive ? true : null)
            .query("max_depth", maxDepth), DirListing.class).entries();
    }

    public FileStat stat(String path) {
        return t.json(call("readSessionFile", path).query("stat", true), FileStat.class);
    }

    /** Deletes a file or a directory tree. */
    public void delete(String path) {
        t.send(call("deleteSessionFile", path).expect(204));
    }

    public FileStat mkdir(String path) {
        return mkdir(path, false, null);
    }

    /** Makes a directory (parents: its missing parents too; mode e.g. "0755", null: default). */
    public FileStat mkdir(String path, boolean parents, String mode) {
        return t.json(call("makeSessionDirectory", path).query("parents", parents ? true : null)
            .query("mode", mode), FileStat.class);
    }

    public FileStat move(String from, String to) {
        return move(from, to, false);
    }

    public FileStat move(String from, String to, boolean overwrite) {
        return t.json(new Transport.Call("moveSessionFile").param("id", sid)
            .json(Transport.object().put("from", from).put("to", to).put("overwrite", overwrite)), FileStat.class);
    }

    /** The tree under path as a tar. */
    public byte[] archive(String path) {
        return archive(path, null, null);
    }

    public byte[] archive(String path, Integer maxEntries, Long maxBytes) {
        return t.bytes(call("getSessionArchive", path).query("max_entries", maxEntries).query("max_bytes", maxBytes)
            .accept("application/x-tar"));
    }

    /** Extracts a tar (optionally compressed) into the directory path. */
    public ArchiveExtracted extract(String path, byte[] tar) {
        return extract(path, tar, null, null);
    }

    public ArchiveExtracted extract(String path, byte[] tar, Integer maxEntries, Long maxBytes) {
        return t.json(call("putSessionArchive", path).query("max_entries", maxEntries).query("max_bytes", maxBytes)
            .body(tar, "application/x-tar").expect(201), ArchiveExtracted.class);
    }

    /**
     * File events under a directory: {@code ready} (the watch is in place),
     * then create / modify / delete / move, {@code overflow}, and {@code end}.
     * Close the stream to stop watching.
     */
    public EventStream<WatchEvent> watch(String path, boolean recursive) {
        return t.events(call("watchSessionFiles", path).query("recursive", recursive ? true : null))
            .map(ev -> new WatchEvent(ev.event(), ev.data()), ev -> ev.event().equals("end"));
    }
}
