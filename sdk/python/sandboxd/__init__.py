"""A shim, so that `sdk/python` on PYTHONPATH works like `sdk/python/src`:
it makes this package's path the real one (src/sandboxd) and runs its
__init__.  Not part of the installed package (pyproject finds src/ only)."""
import os as _os

__path__ = [_os.path.join(_os.path.dirname(_os.path.dirname(_os.path.abspath(__file__))),
                          "src", "sandboxd")]
_init = _os.path.join(__path__[0], "__init__.py")
with open(_init) as _f:
    exec(compile(_f.read(), _init, "exec"))
