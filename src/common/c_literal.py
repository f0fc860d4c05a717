"""c_literal.py — text as C string literals, for the build's generators
that embed files into the daemon (store/migrations/gen_migrations.py,
core/contexts/gen_drivers.py).

The bytes of the literal are exactly the file's UTF-8 bytes; only their
spelling in C differs: printable ASCII as is, the rest escaped."""


def c_bytes(line):
    """One line of UTF-8 as the inside of a C string literal."""
    out = []
    for b in line.encode('utf-8'):
        c = chr(b)
        if c in '\\"':
            out.append('\\' + c)
        elif c == '\n':
            out.append('\\n')
        elif c == '\t':
            out.append('\\t')
        elif 0x20 <= b <= 0x7e and c != '?':  # '?' too: no trigraphs
            out.append(c)
        else:
            out.append('\\%03o' % b)  # octal: never swallows the next char
    return ''.join(out)


def c_string(text):
    """The text as a C string literal, one source line per line of text."""
    out = ['    "%s"' % c_bytes(line) for line in text.splitlines(keepends=True)]
    return '\n'.join(out) if out else '    ""'
