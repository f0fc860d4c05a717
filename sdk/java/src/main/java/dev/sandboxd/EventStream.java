// EventStream.java — an open Server-Sent Events answer as an Iterator (and a
// java.util.stream.Stream), closed by try-with-resources or at its last event.
package dev.sandboxd;

import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;
import java.util.Spliterator;
import java.util.Spliterators;
import java.util.function.Function;
import java.util.function.Predicate;
import java.util.stream.Stream;
import java.util.stream.StreamSupport;

/**
 * The events of a stream, read as they arrive.  Single use.  Closing it
 * early drops the connection: for a foreground exec that kills the command,
 * for a process's output or a watch it only stops following.
 */
public final class EventStream<T> implements Iterator<T>, Iterable<T>, AutoCloseable {
    /** Where the raw events come from. */
    interface Source extends AutoCloseable {
        /** The next event, or null at the end. */
        Transport.SseEvent next();

        @Override
        void close();

        static Source of(List<Transport.SseEvent> events) {
            Iterator<Transport.SseEvent> it = events.iterator();
            return new Source() {
                @Override
                public Transport.SseEvent next() {
                    return it.hasNext() ? it.next() : null;
                }

                @Override
                public void close() {
                }
            };
        }
    }

    private final Source src;
    private final Function<Transport.SseEvent, T> map;
    private final Predicate<T> last;
    private T pending;
    private boolean done;

    /** map turns a raw event into a T (null skips it); after an event that last accepts, the stream ends. */
    EventStream(Source src, Function<Transport.SseEvent, T> map, Predicate<T> last) {
        this.src = src;
        this.map = map;
        this.last = last;
    }

    /** The same stream seen through fn (null skips an event), ending after an event last accepts. */
    <R> EventStream<R> map(Function<T, R> fn, Predicate<R> lastOne) {
        return new EventStream<>(src, ev -> {
            T t = map.apply(ev);
            return t == null ? null : fn.apply(t);
        }, lastOne);
    }

    @Override
    public boolean hasNext() {
        if (pending != null) return true;
        while (!done) {
            Transport.SseEvent ev;
            try {
                ev = src.next();
            } catch (RuntimeException e) {
                close();
                throw e;
            }
            if (ev == null) {
                close();
                return false;
            }
            T t = map.apply(ev);
            if (t == null) continue;
            pending = t;
            if (last.test(t)) close();
            return true;
        }
        return false;
    }

    @Override
    public T next() {
        if (!hasNext()) throw new NoSuchElementException();
        T t = pending;
        pending = null;
        return t;
    }

    /** This stream itself (it can be iterated once). */
    @Override
    public Iterator<T> iterator() {
        return this;
    }

    /** The events as a java.util.stream.Stream; closing it closes this. */
    public Stream<T> stream() {
        return StreamSupport.stream(Spliterators.spliteratorUnknownSize(this, Spliterator.ORDERED), false)
            .onClose(this::close);
    }

    /** Drops the connection (idempotent). */
    @Override
    public void close() {
        done = true;
        src.close();
    }
}
