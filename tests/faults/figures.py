"""Lines the fault tests report (kill points tried, divergences, lag per run); ``conftest.py`` prints
them in a "fault suite figures" section at the end of the run, so CI logs carry the figures."""

FIGURES: list[str] = []
