"""Known upstream issues in the tests: what the torch installed here shows (by the shipped
catalog), the seed's error line, and an entry written as a user writes one."""

from __future__ import annotations


def seed_race_shows_here() -> bool:
    """Whether the torch installed here has the seed's face of the race (pytorch#126024: the FX
    tracing flag process-global), by the shipped catalog's range — which the drafter tests hold
    to what the drafter shows on this torch (2.13.0+cpu: it races; 2.14.x: the face is fixed)."""
    from importlib.metadata import version

    from sleuth.hypotheses.known import load_known

    return load_known()["pytorch#126024"].applies_to(version("torch"))


SEED_ERROR = ("RuntimeError: Detected that you are using FX to symbolically trace a dynamo-optimized function. "
              "This is not supported at the moment.")


def entry_toml(ident: str, package: str, affected: str, *, signature: str | None = None, fixed_in: str | None = None,
               explains: str = "compile-race") -> str:
    return (f'[[issue]]\nid = "{ident}"\ntitle = "{ident} title"\npackage = "{package}"\naffected = "{affected}"\n'
            + (f'fixed_in = "{fixed_in}"\n' if fixed_in else "")
            + (f"signature = ['{signature}']\n" if signature else "")
            + f'explains = ["{explains}"]\nworkarounds = ["lock"]\nsource = "https://example.invalid/{ident}"\n'
              'checked = 2026-12-01\n\n')
