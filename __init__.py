"""sleuth: a terminal debugging assistant for failures in remote GPU training.

The repository's top-level folders are this package's subpackages once installed
(``sleuth.app``, ``sleuth.sessions``, ``sleuth.hypotheses``, ``sleuth.probes``): the
distribution maps the package ``sleuth`` onto the repository root (docs/decisions.md,
"One import namespace"), so nothing named ``app`` or ``sessions`` lands in site-packages.
The example drafter ships beside them as data (``examples/drafter/``).
"""

__version__ = "0.2.0"
