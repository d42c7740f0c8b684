"""What ``--resume`` / ``-r`` was given when no id followed it: open the picker.

A module of its own so that the command line and the code that runs the agent share the
marker without importing each other.
"""

PICK = "<pick>"  # --resume without an id: open the picker
