"""``rdasim evaluate``: the research proposal's evaluation (section 4.2) as named sweeps and one report.

A study (study.py) names its sweep's points and how to judge its rows against a reference;
run.py runs each study's sweep through the sweep machinery (resumable, exactly once);
report.py writes DIR/evaluation.md with a table, checks and a figure per study.
"""
