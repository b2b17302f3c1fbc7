"""What the tests share, apart from the tests themselves (tests/conftest.py holds the fixtures):

- cli.py: ``sleuth(...)``, the installed command run as a user runs it; ``SLEUTH``; ``verdicts``
- sessions.py: ``env_state`` and ``record_run``, a run's state and a recorded run in a session
- known.py: ``seed_race_shows_here`` (whether the torch installed here has the seed's race)
- project.py: what the ``make_project`` fixture writes (a directory sleuth works in)
- ui_sessions.py: workspaces and recorded hunts with fixed timestamps for the UI tests
- sshd_harness.py, slurm_harness.py: real OpenSSH servers and a four-node Slurm cluster
- mermaid_check.py, postmortem_check.py: what a reader checks in a flowchart and a postmortem
- ddp_job.py, ddp_spawn_job.py, hang_job.py, lightning_job.py: training jobs the hang readings
  are tested on; drafter_split.py: the example drafter split over two files
"""
