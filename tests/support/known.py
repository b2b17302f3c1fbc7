"""What the torch installed here shows, by the shipped catalog of known upstream issues."""

from __future__ import annotations


def seed_race_shows_here() -> bool:
    """Whether the torch installed here has the seed's face of the race (pytorch#126024: the FX
    tracing flag process-global), by the shipped catalog's range — which the drafter tests hold
    to what the drafter shows on this torch (2.13.0+cpu: it races; 2.14.x: the face is fixed)."""
    from importlib.metadata import version

    from sleuth.hypotheses.known import load_known

    return load_known()["pytorch#126024"].applies_to(version("torch"))
