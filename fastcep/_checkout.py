"""Imported from a checkout's own ``fastcep/`` folder, find ``kernels/`` and ``data_tools/``.

Python run in a checkout's root puts that root first on the path, before any install, so
``import fastcep`` finds the source folder ``fastcep/``. The folders an install maps into the
package, ``kernels/`` and ``data_tools/`` (``pyproject.toml``), sit beside it there, not in it:
the package's path gets the root too, so that ``fastcep.kernels`` is found. Installed copies
hold both folders themselves and are left as they are.
"""

import pathlib
import sys


def complete_package_path(package):
    """Append the checkout's root to ``package.__path__`` where the package is a checkout's
    source folder; returns True if it did."""
    here = pathlib.Path(package.__file__).resolve().parent
    root = here.parent
    if (here / "kernels").is_dir() or not (root / "kernels" / "_config.py").is_file():
        return False
    if str(root) not in package.__path__:
        package.__path__.append(str(root))
    return True


complete_package_path(sys.modules[__package__])
