// Paging.java — every item of a listing, following its cursors lazily.
package dev.sandboxd;

import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;
import java.util.function.Function;

final class Paging {
    private Paging() {
    }

    /** One page: its items and the cursor of the next (null: the last). */
    record Page<T>(List<T> items, String next) {
    }

    /** Iterates every page from the first (fetch(null)), each fetched when needed. */
    static <T> Iterable<T> all(Function<String, Page<T>> fetch) {
        return () -> new Iterator<T>() {
            private Page<T> page = fetch.apply(null);
            private int i;

            @Override
            public boolean hasNext() {
                while (i >= page.items().size()) {
                    if (page.next() == null) return false;
                    page = fetch.apply(page.next());
                    i = 0;
                }
                return true;
            }

            @Override
            public T next() {
                if (!hasNext()) throw new NoSuchElementException();
                return page.items().get(i++);
            }
        };
    }
}
