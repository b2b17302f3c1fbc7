"""What a job's stacks say when it stops: the ranks grouped by where their threads wait, the
odd ranks named with file:line and function, stuck told from slow, and which kind of stop it
is — a collective mismatch, a deadlock inside a rank, a straggler — or a healthy job.

Pure: it reads the ``rank`` records of a ``stacks`` run (probes/scripts/stacks.py: py-spy's
samples of every thread, and per thread the CPU time and context switches over the window)
and returns the result fields the hang hypotheses' rules read, plus sentences. A thread with
no CPU and no context switch over the window is stuck; one that moved is at most slow.

One job per module: frames.py classifies a stack frame; rank.py reads one rank from its
record; world.py says who of the world is missing or elsewhere; straggler.py is the straggler
test; verdicts.py is the reading (healthy, straggler, stuck, …) and its sentences;
flight_recorder.py reads torch's Flight Recorder across ranks; reading.py puts them together.
"""

from __future__ import annotations

from .flight_recorder import read_flight_recorder
from .frames import COLLECTIVES, is_library
from .rank import RankView, state_word
from .reading import analyze_stacks, with_hang_analysis

__all__ = ["COLLECTIVES", "RankView", "analyze_stacks", "is_library", "read_flight_recorder", "state_word",
           "with_hang_analysis"]
